#include "core/executor.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace tilegrad::core {

namespace {

// Executors are handed out as opaque ids that are never reused, so launching one twice (or
// launching a destroyed one) is detected instead of touching freed memory.
struct Entry {
  std::string op;
  std::unique_ptr<Launch> launch;
};

std::mutex g_mutex;
std::unordered_map<uintptr_t, Entry> g_executors;
uintptr_t g_next_id = 0x1000;

struct AlignedBuffer {
  void* ptr = nullptr;
  uint64_t capacity = 0;
  void reserve(uint64_t bytes) {
    if (bytes <= capacity) return;
    std::free(ptr);
    capacity = 0;
    ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!ptr) throw std::bad_alloc();
    capacity = bytes;
  }
  ~AlignedBuffer() { std::free(ptr); }
};

// Native-path workspaces are kept per calling thread (up to kCachedWorkspaceLimit) so that repeated
// calls do not pay an allocation and its page faults each time (measured: ~31 faults per call for
// embedding backward's 1.8 MB workspace at D=64). A launch that itself runs a launch on the same
// thread gets a fresh buffer (the cached one is in use).
constexpr uint64_t kCachedWorkspaceLimit = 64ull << 20;
thread_local AlignedBuffer t_workspace;
thread_local bool t_workspace_in_use = false;

}  // namespace

void run_now(Launch& launch) {
  const uint64_t bytes = launch.workspace_bytes();
  if (bytes == 0) return launch.run(nullptr);
  if (bytes > kCachedWorkspaceLimit || t_workspace_in_use) {
    AlignedBuffer own;
    own.reserve(bytes);
    return launch.run(own.ptr);
  }
  t_workspace.reserve(bytes);
  t_workspace_in_use = true;
  try {
    launch.run(t_workspace.ptr);
  } catch (...) {
    t_workspace_in_use = false;
    throw;
  }
  t_workspace_in_use = false;
}

void check_executor_out_pointers(const char* op, const uint64_t* workspace_size, aclOpExecutor** executor) {
  if (!workspace_size) fail(Status::kParamNullptr, op, "GetWorkspaceSize: workspaceSize out-pointer is null");
  if (!executor) fail(Status::kParamNullptr, op, "GetWorkspaceSize: executor out-pointer is null");
}

aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t id = g_next_id;
  g_next_id += 16;
  g_executors.emplace(id, Entry{op, std::move(launch)});
  return reinterpret_cast<aclOpExecutor*>(id);
}

int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  return guard(op, [&] {
    std::unique_ptr<Launch> launch;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      auto it = g_executors.find(reinterpret_cast<uintptr_t>(executor));
      if (!executor) fail(Status::kParamNullptr, op, ": executor is null");
      check(it != g_executors.end(), op, ": executor ", static_cast<const void*>(executor),
            " is not live (already launched, destroyed, or never created)");
      check(it->second.op == op, op, ": executor was created by ", it->second.op, "GetWorkspaceSize, not ", op,
            "GetWorkspaceSize");
      const uint64_t needed = it->second.launch->workspace_bytes();
      check(workspace_size >= needed, op, ": workspaceSize ", workspace_size, " is smaller than the ", needed,
            " bytes GetWorkspaceSize asked for");
      check(workspace != nullptr || workspace_size == 0, op, ": workspace is null but workspaceSize is ",
            workspace_size);
      launch = std::move(it->second.launch);
      g_executors.erase(it);
    }
    launch->run(workspace);
  });
}

}  // namespace tilegrad::core

extern "C" ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  using namespace tilegrad::core;
  return guard("aclDestroyAclOpExecutor", [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    check(g_executors.erase(reinterpret_cast<uintptr_t>(executor)) == 1,
          "aclDestroyAclOpExecutor: executor is not live (already launched, destroyed, or never created)");
  });
}
