#include "core/executor.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace tilegrad::core {

namespace {

// Executors are handed out as opaque ids that are never reused, so launching a released one (or
// a destroyed one) is detected instead of touching freed memory.
struct Entry {
  std::string op;
  std::shared_ptr<Launch> launch;  // shared: a running launch survives a concurrent destroy
  bool repeatable = false;
  // Rebindable executors only (make is empty otherwise):
  TensorParams params;
  MakeLaunch make;
  std::vector<TensorRecord> tensors;
  bool stale = false;  // an address changed since `launch` was built
};

std::mutex g_mutex;
std::unordered_map<uintptr_t, Entry> g_executors;
uintptr_t g_next_id = 0x1000;

thread_local std::vector<TensorRecord>* t_recording = nullptr;
thread_local std::vector<TensorRecord>* t_replaying = nullptr;

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

// launch.run(workspace), timed and traced when TILEGRAD_VERBOSE recorded a line for it.
void run_traced(Launch& launch, void* workspace) {
  launch.trace().timed([&] { launch.run(workspace); });
}

}  // namespace

void run_now(Launch& launch) {
  const uint64_t bytes = launch.workspace_bytes();
  if (bytes == 0) return run_traced(launch, nullptr);
  if (bytes > kCachedWorkspaceLimit || t_workspace_in_use) {
    AlignedBuffer own;
    own.reserve(bytes);
    return run_traced(launch, own.ptr);
  }
  t_workspace.reserve(bytes);
  t_workspace_in_use = true;
  try {
    run_traced(launch, t_workspace.ptr);
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

std::vector<TensorRecord>* record_tensors_into(std::vector<TensorRecord>* into) {
  std::vector<TensorRecord>* previous = t_recording;
  t_recording = into;
  return previous;
}

const aclTensor* executor_tensor(const char* arg, const aclTensor* t) {
  if (t_replaying) {
    for (const TensorRecord& r : *t_replaying)
      if (r.user == t && r.arg == arg) return &r.copy;
    fail(Status::kInner, "executor rebuild: ", arg, " was not recorded at GetWorkspaceSize");
  }
  if (t_recording && t) t_recording->push_back(TensorRecord{t, arg, *t});
  return t;
}

// Kernel-half addresses (never a user-space pointer on x86-64 / AArch64 Linux), 1 TiB apart.
constexpr uintptr_t kPlaceholderBase = uintptr_t(0xffffa00000000000ull);
constexpr uintptr_t kPlaceholderStride = uintptr_t(1) << 40;

void* executor_placeholder_data(const aclTensor* t) {
  if (!t_recording || t_recording->empty() || t_recording->back().user != t) return nullptr;
  TensorRecord& r = t_recording->back();  // executor_tensor recorded t just before
  r.placeholder = true;
  return reinterpret_cast<void*>(kPlaceholderBase + (t_recording->size() - 1) * kPlaceholderStride);
}

bool executor_rebuilding() { return t_replaying != nullptr; }

namespace {

uintptr_t insert_entry(Entry entry) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t id = g_next_id;
  g_next_id += 16;
  g_executors.emplace(id, std::move(entry));
  return id;
}

// The live entry behind `executor` (caller holds g_mutex): 161001 for NULL, 161002 if not live.
Entry& live_entry(const char* fn, aclOpExecutor* executor) {
  if (!executor) fail(Status::kParamNullptr, fn, ": executor is null");
  auto it = g_executors.find(reinterpret_cast<uintptr_t>(executor));
  check(it != g_executors.end(), fn, ": executor ", static_cast<const void*>(executor),
        " is not live (already launched, destroyed, or never created)");
  return it->second;
}

// Runs the entry's make() again over its tensor copies (new addresses), replacing its launch.
void rebuild(Entry& e) {
  std::vector<TensorRecord>* previous = t_replaying;
  t_replaying = &e.tensors;
  try {
    e.launch = e.make();
  } catch (...) {
    t_replaying = previous;
    throw;
  }
  t_replaying = previous;
  e.stale = false;
}

}  // namespace

aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch) {
  Entry e;
  e.op = op;
  e.launch = std::move(launch);
  return reinterpret_cast<aclOpExecutor*>(insert_entry(std::move(e)));
}

aclOpExecutor* register_rebindable_executor(const char* op, std::unique_ptr<Launch> launch, TensorParams params,
                                            MakeLaunch make, std::vector<TensorRecord> tensors) {
  Entry e;
  e.op = op;
  e.launch = std::move(launch);
  e.params = std::move(params);
  e.make = std::move(make);
  e.tensors = std::move(tensors);
  for (const TensorRecord& r : e.tensors) e.stale |= r.placeholder;  // built over stand-ins: rebuild first
  return reinterpret_cast<aclOpExecutor*>(insert_entry(std::move(e)));
}

int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  return guard(op, [&] {
    std::shared_ptr<Launch> launch;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      Entry& e = live_entry(op, executor);
      check(e.op == op, op, ": executor was created by ", e.op, "GetWorkspaceSize, not ", op, "GetWorkspaceSize");
      if (e.stale) rebuild(e);
      const uint64_t needed = e.launch->workspace_bytes();
      check(workspace_size >= needed, op, ": workspaceSize ", workspace_size, " is smaller than the ", needed,
            " bytes GetWorkspaceSize asked for");
      check(workspace != nullptr || workspace_size == 0, op, ": workspace is null but workspaceSize is ",
            workspace_size);
      launch = e.launch;
      if (!e.repeatable) g_executors.erase(reinterpret_cast<uintptr_t>(executor));
    }
    run_traced(*launch, workspace);
  });
}

// index-th tensor parameter (`kind` "input"/"output" among `names`) of a repeatable, rebindable
// executor gets data pointer addr, in the executor's copy and in the caller's tensor.
static aclnnStatus set_tensor_addr(const char* fn, const char* kind, bool output, aclOpExecutor* executor,
                                   size_t index, aclTensor* tensor, void* addr) {
  return guard(fn, [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    Entry& e = live_entry(fn, executor);
    require_not_null(fn, "tensor", tensor);
    check(e.repeatable, fn, ": executor of ", e.op, " is not repeatable (call aclSetAclOpExecutorRepeatable "
          "right after ", e.op, "GetWorkspaceSize)");
    check(static_cast<bool>(e.make), fn, ": ", e.op, " executors run with the addresses given at GetWorkspaceSize ",
          "only (this operator does not support new tensor addresses)");
    const std::vector<std::string>& names = output ? e.params.outputs : e.params.inputs;
    check(index < names.size(), fn, ": index ", index, " is out of range: ", e.op, " has ", names.size(), " ", kind,
          " tensors");
    const std::string& arg = names[index];
    bool found = false;
    for (TensorRecord& r : e.tensors) {
      if (r.arg != arg) continue;
      check(r.user == tensor, fn, ": tensor ", static_cast<const void*>(tensor), " is not the ", arg, " (", kind, " ",
            index, ") passed to ", e.op, "GetWorkspaceSize");
      r.copy.data = addr;
      found = true;
    }
    check(found, fn, ": ", kind, " ", index, " (", arg, ") of ", e.op,
          " was null at GetWorkspaceSize (or unused), so it has no address to refresh");
    tensor->data = addr;
    e.stale = true;
  });
}

}  // namespace tilegrad::core

using namespace tilegrad::core;

extern "C" {

ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  return guard("aclDestroyAclOpExecutor", [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_entry("aclDestroyAclOpExecutor", executor);
    g_executors.erase(reinterpret_cast<uintptr_t>(executor));
  });
}

ACLNN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  return guard("aclSetAclOpExecutorRepeatable", [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_entry("aclSetAclOpExecutorRepeatable", executor).repeatable = true;
  });
}

ACLNN_API aclnnStatus aclSetInputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                            void* addr) {
  return set_tensor_addr("aclSetInputTensorAddr", "input", false, executor, index, tensor, addr);
}

ACLNN_API aclnnStatus aclSetOutputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                             void* addr) {
  return set_tensor_addr("aclSetOutputTensorAddr", "output", true, executor, index, tensor, addr);
}

// No tilegrad operator takes a tensor list, so there is never a dynamic input to refresh.
static aclnnStatus no_dynamic_tensors(const char* fn, aclOpExecutor* executor, size_t ir_index,
                                      aclTensorList* tensors) {
  return guard(fn, [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    Entry& e = live_entry(fn, executor);
    require_not_null(fn, "tensors", tensors);
    fail(tilegrad::Status::kParamInvalid, fn, ": ", e.op, " has no tensor-list parameter (irIndex ", ir_index, ")");
  });
}

ACLNN_API aclnnStatus aclSetDynamicInputTensorAddr(aclOpExecutor* executor, size_t irIndex, const size_t,
                                                   aclTensorList* tensors, void*) {
  return no_dynamic_tensors("aclSetDynamicInputTensorAddr", executor, irIndex, tensors);
}

ACLNN_API aclnnStatus aclSetDynamicOutputTensorAddr(aclOpExecutor* executor, size_t irIndex, const size_t,
                                                    aclTensorList* tensors, void*) {
  return no_dynamic_tensors("aclSetDynamicOutputTensorAddr", executor, irIndex, tensors);
}

}  // extern "C"
