// Launch: what phase 1 (validate + tiling) prepares and phase 2 runs. The aclnn C ABI keeps
// launches in single-use executors; the native C++ API and Python run them at once.
#pragma once

#include <cstdint>
#include <memory>

#include "aclnn/aclnn_base.h"

namespace tilegrad::core {

class Launch {
 public:
  virtual ~Launch() = default;
  // Scratch bytes run() needs (0 for most operators).
  virtual uint64_t workspace_bytes() const { return 0; }
  // Runs the tiles over `workspace` (workspace_bytes() bytes, 64-byte aligned when allocated here).
  // May throw tilegrad::Error for data-dependent errors (an index out of range).
  virtual void run(void* workspace) = 0;
};

// Native path: runs a launch with a workspace allocated (and freed) here.
void run_now(Launch& launch);

// C ABI phase 1: checks the out-pointers (161001), builds the launch with make(), registers it.
// make() is only called after the out-pointers were checked.
template <class Make>
int32_t create_executor(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, Make&& make);

// C ABI phase 2: checks the executor belongs to `op` and is live, the workspace is large enough,
// then runs it and releases the executor (a second launch returns 161002).
int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor);

// Registry plumbing for create_executor.
aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch);
void check_executor_out_pointers(const char* op, const uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace tilegrad::core

#include "core/error.h"

namespace tilegrad::core {

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

}  // namespace tilegrad::core
