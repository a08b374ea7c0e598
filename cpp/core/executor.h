// Launch: what phase 1 (validate + tiling) prepares and phase 2 runs. The aclnn C ABI keeps
// launches in executors (single-use by default, repeatable on request); the native C++ API and
// Python run them at once.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "core/trace.h"

namespace tilegrad::core {

class Launch {
 public:
  virtual ~Launch() = default;
  // Scratch bytes run() needs (0 for most operators).
  virtual uint64_t workspace_bytes() const { return 0; }
  // Runs the tiles over `workspace` (workspace_bytes() bytes, 64-byte aligned when allocated here).
  // May throw tilegrad::Error for data-dependent errors (an index out of range). Must leave the
  // launch able to run again (repeatable executors run it any number of times).
  virtual void run(void* workspace) = 0;
  // The TILEGRAD_VERBOSE line: recorded by the operator when it builds the launch (trace_.record(...),
  // nothing when off); run_now / launch_executor print it with the time run() took.
  const Trace& trace() const { return trace_; }

 protected:
  Trace trace_;
};

// Native path (C++ and Python APIs): runs a launch with a workspace allocated here. An allocation
// failure is a MemoryError-kind Error (status 561000) naming the operator and the workspace size.
void run_now(const char* op, Launch& launch);

// The operator's tensor parameters in the order of its GetWorkspaceSize signature, named as its
// make() passes them to view_of (optional ones included): what aclSetInputTensorAddr's and
// aclSetOutputTensorAddr's index counts (aclSetTensorAddr's: inputs, then outputs). A tensor-list
// parameter is named "<name>[]" and read with list_views_of(op, "<name>", list), which records element i
// as "<name>[i]": aclSetDynamic*TensorAddr(irIndex, relativeIndex) then refresh element addresses.
struct TensorParams {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// C ABI phase 1: checks the out-pointers (161001), builds the launch with make(), registers it.
// make() is only called after the out-pointers were checked. Executors made here launch with the
// addresses of phase 1 only (aclSet*TensorAddr returns 161002).
template <class Make>
int32_t create_executor(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, Make&& make);

// Same, for an executor that can take new tensor addresses (aclSetInputTensorAddr /
// aclSetOutputTensorAddr): make() is kept and run again before a launch after an address changed,
// with view_of answering from the executor's own copies of the tensors. So make() must capture by
// value ([=]; its tensor pointers are only compared with null then) and read tensors only through
// view_of / optional_view_of.
template <class Make>
int32_t create_rebindable_executor(const char* op, TensorParams params, uint64_t* workspace_size,
                                   aclOpExecutor** executor, Make make);

// C ABI phase 2: checks the executor belongs to `op` and is live, the workspace is large enough,
// then runs it; a single-use executor is released (a second launch returns 161002).
int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor);

// view_of's hook: while an executor records its make(), notes t (a copy of it) under `arg` and
// returns t; while it rebuilds, returns its copy of the tensor recorded under `arg`; otherwise t.
const aclTensor* executor_tensor(const char* arg, const aclTensor* t);

// list_views_of's hook: the elements of `list` (a tensor-list parameter named arg); while an executor
// rebuilds, the caller's element pointers recorded as "<arg>[i]" (the list itself is not read again).
std::vector<const aclTensor*> executor_tensor_list(const char* arg, const aclTensorList* list);

// view_of's stand-in for a NULL data pointer while a rebindable executor records its make() (the
// vendor's repeatable-executor samples create tensors without data and set the addresses later): a
// distinct address in kernel space, where no user pointer lies, that phase 1 only compares and never
// reads (no operator reads data before its launch). The executor then rebuilds before every launch
// until all addresses were given. nullptr when not recording.
void* executor_placeholder_data(const aclTensor* t);
// True while an executor's make() runs again over new addresses.
bool executor_rebuilding();

// Registry plumbing for create_executor.
using MakeLaunch = std::function<std::unique_ptr<Launch>()>;
struct TensorRecord;
aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch);
aclOpExecutor* register_rebindable_executor(const char* op, std::unique_ptr<Launch> launch, TensorParams params,
                                            MakeLaunch make, std::vector<TensorRecord> tensors);
void check_executor_out_pointers(const char* op, const uint64_t* workspace_size, aclOpExecutor** executor);
// Makes this thread record the tensors view_of sees into *into (nullptr: stop), returns the previous.
std::vector<TensorRecord>* record_tensors_into(std::vector<TensorRecord>* into);

}  // namespace tilegrad::core

#include "core/acl_tensor.h"
#include "core/error.h"

namespace tilegrad::core {

// One tensor an executor's make() read: the caller's pointer, the parameter name, and a copy of it
// (whose data pointer aclSet*TensorAddr replaces).
struct TensorRecord {
  const aclTensor* user = nullptr;
  std::string arg;
  aclTensor copy;
  bool placeholder = false;  // recorded with NULL data: phase 1 used a stand-in address
};

template <class Make>
int32_t create_executor(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, Make&& make) {
  return guard(op, [&] {
    check_executor_out_pointers(op, workspace_size, executor);
    std::unique_ptr<Launch> launch = make();
    const uint64_t bytes = launch->workspace_bytes();
    *executor = register_executor(op, std::move(launch));
    *workspace_size = bytes;
  });
}

template <class Make>
int32_t create_rebindable_executor(const char* op, TensorParams params, uint64_t* workspace_size,
                                   aclOpExecutor** executor, Make make) {
  return guard(op, [&] {
    check_executor_out_pointers(op, workspace_size, executor);
    std::vector<TensorRecord> tensors;
    std::vector<TensorRecord>* previous = record_tensors_into(&tensors);
    std::unique_ptr<Launch> launch;
    try {
      launch = make();
    } catch (...) {
      record_tensors_into(previous);
      throw;
    }
    record_tensors_into(previous);
    const uint64_t bytes = launch->workspace_bytes();
    *executor = register_rebindable_executor(op, std::move(launch), std::move(params), MakeLaunch(std::move(make)),
                                             std::move(tensors));
    *workspace_size = bytes;
  });
}

}  // namespace tilegrad::core
