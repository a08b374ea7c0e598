// Host callbacks on a stream (aclrtSubscribeReport, aclrtLaunchCallback, aclrtProcessReport,
// aclrtUnSubscribeReport) and aclrtSetOpWaitTimeout, on the CPU runtime where streams are synchronous:
// everything launched on a stream before a callback has finished when aclrtLaunchCallback is called,
// so the callback is simply queued for the thread subscribed to the stream, which runs it in
// aclrtProcessReport. Threads are named by their pthread id, as in the vendor's samples.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "acl/acl.h"
#include "core/acl_runtime.h"
#include "core/error.h"

namespace tilegrad::core {
namespace {

struct Task {
  aclrtCallback fn = nullptr;
  void* user_data = nullptr;
  uintptr_t stream = 0;
  uint64_t id = 0;
};

std::mutex g_mutex;
std::condition_variable g_changed;                // a task was queued or finished
std::map<uintptr_t, uint64_t> g_subscriber;       // stream -> the thread that runs its callbacks
std::map<uint64_t, std::deque<Task>> g_queues;    // thread -> its queued callbacks, in launch order
std::set<uint64_t> g_unfinished;                  // ids of queued or running callbacks
std::map<uintptr_t, int64_t> g_unfinished_per_stream;
uint64_t g_next_task = 1;
uint32_t g_op_wait_timeout_s = 0;

uint64_t this_thread_id() { return static_cast<uint64_t>(pthread_self()); }
uintptr_t key(aclrtStream stream) { return reinterpret_cast<uintptr_t>(stream); }

// Runs `task` without the lock, then marks it finished (caller holds `lock`).
void run_task(std::unique_lock<std::mutex>& lock, const Task& task) {
  lock.unlock();
  task.fn(task.user_data);
  lock.lock();
  g_unfinished.erase(task.id);
  if (--g_unfinished_per_stream[task.stream] == 0) g_unfinished_per_stream.erase(task.stream);
  g_changed.notify_all();
}

// Runs the calling thread's queued callbacks of `stream` (every stream when all_streams), in order.
void run_own_tasks(std::unique_lock<std::mutex>& lock, uintptr_t stream, bool all_streams) {
  for (;;) {
    std::deque<Task>& queue = g_queues[this_thread_id()];
    auto it = queue.begin();
    while (it != queue.end() && !all_streams && it->stream != stream) ++it;
    if (it == queue.end()) return;
    const Task task = *it;
    queue.erase(it);
    run_task(lock, task);
  }
}

// Waits on g_changed until done() holds; timeout_ms -1 waits for ever. False on timeout.
template <class Done>
bool wait_until(std::unique_lock<std::mutex>& lock, int32_t timeout_ms, Done done) {
  if (timeout_ms < 0) {
    g_changed.wait(lock, done);
    return true;
  }
  return g_changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
}

}  // namespace

aclError wait_stream_callbacks(const char* fn, aclrtStream stream, bool all_streams, int32_t timeout_ms) {
  std::unique_lock<std::mutex> lock(g_mutex);
  run_own_tasks(lock, key(stream), all_streams);
  const bool finished = wait_until(lock, timeout_ms, [&] {
    return all_streams ? g_unfinished.empty() : g_unfinished_per_stream.count(key(stream)) == 0;
  });
  if (!finished)
    return rt_fail(concat(fn, ": callbacks on the stream did not finish within ", timeout_ms, " ms (the thread "
                          "subscribed to it must call aclrtProcessReport)"), ACL_ERROR_RT_WAIT_TIMEOUT);
  return ACL_SUCCESS;
}

void forget_stream_callbacks(aclrtStream stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_subscriber.erase(key(stream));
}

}  // namespace tilegrad::core

using namespace tilegrad::core;

extern "C" {

aclError aclrtSetOpWaitTimeout(uint32_t timeout) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_op_wait_timeout_s = timeout;  // nothing waits on a synchronous stream; kept for the record
  return ACL_SUCCESS;
}

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
  if (aclError e = check_stream("aclrtSubscribeReport", stream)) return e;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_subscriber.find(key(stream));
  if (it != g_subscriber.end())
    return rt_fail(concat("aclrtSubscribeReport: stream ", stream, " already has a subscribed thread (", it->second,
                          "); one thread per stream"), ACL_ERROR_RT_STREAM_SUBSCRIBE);
  g_subscriber[key(stream)] = threadId;
  return ACL_SUCCESS;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
  if (aclError e = check_stream("aclrtUnSubscribeReport", stream)) return e;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_subscriber.find(key(stream));
  if (it == g_subscriber.end() || it->second != threadId)
    return rt_fail(concat("aclrtUnSubscribeReport: thread ", threadId, " is not subscribed to stream ", stream),
                   ACL_ERROR_RT_THREAD_SUBSCRIBE);
  g_subscriber.erase(it);
  return ACL_SUCCESS;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType, aclrtStream stream) {
  if (!fn) return rt_fail("aclrtLaunchCallback: fn is null");
  const int block = static_cast<int>(blockType);
  if (block != ACL_CALLBACK_NO_BLOCK && block != ACL_CALLBACK_BLOCK)
    return rt_fail(concat("aclrtLaunchCallback: blockType must be ACL_CALLBACK_NO_BLOCK (0) or ACL_CALLBACK_BLOCK (1), "
                          "got ", block));
  if (aclError e = check_stream("aclrtLaunchCallback", stream)) return e;
  std::unique_lock<std::mutex> lock(g_mutex);
  auto sub = g_subscriber.find(key(stream));
  if (sub == g_subscriber.end())
    return rt_fail(concat("aclrtLaunchCallback: stream ", stream, " has no thread to run callbacks (call "
                          "aclrtSubscribeReport first)"), ACL_ERROR_RT_STREAM_NO_CB_REG);
  Task task{fn, userData, key(stream), g_next_task++};
  g_unfinished.insert(task.id);
  ++g_unfinished_per_stream[task.stream];
  if (block == ACL_CALLBACK_BLOCK && sub->second == this_thread_id()) {
    run_task(lock, task);  // the subscribed thread blocking on itself: its own callback runs now
    return ACL_SUCCESS;
  }
  g_queues[sub->second].push_back(task);
  g_changed.notify_all();
  if (block == ACL_CALLBACK_BLOCK) g_changed.wait(lock, [&] { return g_unfinished.count(task.id) == 0; });
  return ACL_SUCCESS;
}

aclError aclrtProcessReport(int32_t timeout) {
  if (timeout != -1 && timeout <= 0)
    return rt_fail(concat("aclrtProcessReport: timeout must be -1 (wait for ever) or > 0 ms, got ", timeout));
  const uint64_t self = this_thread_id();
  std::unique_lock<std::mutex> lock(g_mutex);
  bool subscribed = false;
  for (const auto& entry : g_subscriber) subscribed |= entry.second == self;
  if (!subscribed && g_queues[self].empty())
    return rt_fail(concat("aclrtProcessReport: thread ", self, " is subscribed to no stream (aclrtSubscribeReport)"),
                   ACL_ERROR_RT_THREAD_SUBSCRIBE);
  if (!wait_until(lock, timeout, [&] { return !g_queues[self].empty(); }))
    return rt_fail(concat("aclrtProcessReport: no callback arrived within ", timeout, " ms"),
                   ACL_ERROR_RT_REPORT_TIMEOUT);
  run_own_tasks(lock, 0, true);
  return ACL_SUCCESS;
}

}  // extern "C"
