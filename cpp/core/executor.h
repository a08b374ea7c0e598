// Launch: an operator's work, planned once from its tensors' shapes and bound to their addresses;
// the C ABI keeps launches in executors (single-use by default, repeatable on request), the native
// C++ API and Python run them at once.
//
//   plan  (the Launch's constructor)  validation, tiling, kernel choice, workspace size: from dtypes,
//                                     shapes and strides; then the first bind
//   bind  (Launch::bind)              the rules that depend on addresses (overlaps), then the data
//                                     pointers run() uses
//   run   (Launch::run)               the tiles over the bound tensors
//
// A repeatable executor given new addresses (aclSetInputTensorAddr, ...) binds its launch again before
// the next run: nothing of the plan is redone.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "core/trace.h"
#include "tilegrad/tensor_view.hpp"

struct aclTensor;

namespace tilegrad::core {

// The tensors of one launch by parameter name, as the operator's GetWorkspaceSize names them ("x",
// "gradInput"; element i of a list parameter "paramsRef[i]"). A name not recorded (a null optional
// tensor, or one the operator does not read) reads as the empty TensorView{}.
class Operands {
 public:
  void set(std::string name, const TensorView& view);
  const TensorView& operator[](const std::string& name) const;
  // Gives each view the data pointer of the one recorded under its name (nullptr when none was: an
  // absent optional tensor stays absent). Dtypes, shapes and strides are the caller's, as planned.
  void bind(std::initializer_list<std::pair<const char*, TensorView*>> views) const;

 private:
  std::vector<std::pair<std::string, TensorView>> views_;
};

class Launch {
 public:
  virtual ~Launch() = default;
  // Scratch bytes run() needs (0 for most operators): part of the plan, never changed by bind().
  virtual uint64_t workspace_bytes() const { return 0; }
  // Points the planned launch at new addresses of the tensors it was planned with: `tensors` holds the
  // same views (dtypes, shapes, strides) with the data pointers given since. Checks the rules that
  // depend on addresses (overlaps: 161002) before changing anything. A launch the C ABI never makes
  // (native-only operators) keeps this default, which refuses.
  virtual void bind(const Operands& tensors);
  // Runs the tiles over `workspace` (workspace_bytes() bytes, 64-byte aligned when allocated here).
  // May throw tilegrad::Error for data-dependent errors (an index out of range). Must leave the
  // launch able to run again (repeatable executors run it any number of times).
  virtual void run(void* workspace) = 0;
  // The TILEGRAD_VERBOSE line: recorded by the operator when it plans the launch (trace_.record(...),
  // nothing when off); run_now / launch_executor print it with the time run() took.
  const Trace& trace() const { return trace_; }

 protected:
  Trace trace_;
};

// Native path (C++ and Python APIs): runs a launch with a workspace allocated here. An allocation
// failure is a MemoryError-kind Error (status 561000) naming the operator and the workspace size.
void run_now(const char* op, Launch& launch);

// The operator's tensor parameters in the order of its GetWorkspaceSize signature, named as it views
// them through ExecutorTensors (optional ones included): what aclSetInputTensorAddr's and
// aclSetOutputTensorAddr's index counts (aclSetTensorAddr's: inputs, then outputs). A tensor-list
// parameter is named "<name>[]"; aclSetDynamic*TensorAddr(irIndex, relativeIndex) then give element
// relativeIndex a new address. An in-place operand ("varRef") may be named on both sides.
struct TensorParams {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// The aclTensor arguments of one C ABI phase 1, as the operator's make() views them: each view is
// checked as view_of checks it and remembered with its name and the caller's tensor, so that the
// executor can bind the launch to the addresses aclSet*TensorAddr give later. A tensor created without
// data (the vendor's repeatable-executor samples set the addresses after GetWorkspaceSize) is accepted:
// its view points at a distinct stand-in address in kernel space, where no user pointer lies, which
// phase 1 only compares (no operator reads data before its launch); the launch is refused until the
// tensor was given an address.
class ExecutorTensors {
 public:
  explicit ExecutorTensors(const char* op) : op_(op) {}
  // 161001 for a null t; the view named `arg`.
  TensorView view(const std::string& arg, const aclTensor* t);
  // The empty TensorView{} for a null t. (Element i of a list parameter is viewed as "<arg>[i]".)
  TensorView optional_view(const std::string& arg, const aclTensor* t);

  // One viewed tensor: the caller's aclTensor, its view as planned, and the address it has now.
  struct Record {
    std::string arg;
    const aclTensor* user = nullptr;
    TensorView planned;
    int64_t offset_bytes = 0;  // the view's data = address + offset_bytes
    bool has_elements = false;
    void* address = nullptr;  // null until given (a tensor created without data)
  };
  std::vector<Record>& records() { return records_; }

 private:
  const char* op_;
  std::vector<Record> records_;
};

// C ABI phase 1: checks the out-pointers (161001), then make(tensors) plans the launch over the views
// it takes from `tensors` (an ExecutorTensors&), and the executor is registered with them. make() runs
// once: a repeatable executor given new addresses binds its launch again (Launch::bind).
template <class Make>
int32_t create_executor(const char* op, TensorParams params, uint64_t* workspace_size, aclOpExecutor** executor,
                        Make&& make);

// C ABI phase 2: checks the executor belongs to `op` and is live, binds its launch to the addresses
// given since the last launch (161001 for a tensor still without one), checks the workspace is large
// enough, then runs it; a single-use executor is released (a second launch returns 161002). A
// repeatable executor's launches and address changes must not overlap in time (as on the vendor's
// stream: one executor, one stream).
int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor);

// Registry plumbing for create_executor.
aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch, TensorParams params,
                                 ExecutorTensors tensors);
void check_executor_out_pointers(const char* op, const uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace tilegrad::core

#include "core/error.h"

namespace tilegrad::core {

template <class Make>
int32_t create_executor(const char* op, TensorParams params, uint64_t* workspace_size, aclOpExecutor** executor,
                        Make&& make) {
  return guard(op, [&] {
    check_executor_out_pointers(op, workspace_size, executor);
    ExecutorTensors tensors(op);
    std::unique_ptr<Launch> launch = make(tensors);
    const uint64_t bytes = launch->workspace_bytes();
    *executor = register_executor(op, std::move(launch), std::move(params), std::move(tensors));
    *workspace_size = bytes;
  });
}

}  // namespace tilegrad::core
