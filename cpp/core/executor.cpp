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
  explicit AlignedBuffer(uint64_t bytes) {
    if (bytes == 0) return;
    ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!ptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(ptr); }
};

}  // namespace

void run_now(Launch& launch) {
  AlignedBuffer workspace(launch.workspace_bytes());
  launch.run(workspace.ptr);
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
