/* A CANN program in the style of the vendor's operator examples (C++11, nothing tilegrad-specific):
 * aclnnSiluBackward on float16 data held as op::fp16_t, with a repeatable executor that is launched
 * again after its input and output addresses were replaced (aclSetInputTensorAddr /
 * aclSetOutputTensorAddr), as a training loop does. Prints every result as "round R result[i] is: v";
 * the test suite compares them with SiLU backward in float64. Returns non-zero on any failed call. */
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnn/opdev/fp16_t.h"
#include "aclnn_silu_backward.h"
#include "sample_common.h"  // SampleTensors, CHECK_ACL, RunSample (in the sample project: inc/)

// Prints the float16 data of `tensor` as "round R result[i] is: v".
int PrintResult(int round, const SampleTensors& tensors, const aclTensor* tensor) {
  std::vector<op::fp16_t> resultData;
  CHECK_RET(tensors.Read(tensor, &resultData) == 0, return 1);
  for (size_t i = 0; i < resultData.size(); i++) {
    LOG_PRINT("round %d result[%zu] is: %.9g\n", round, i, static_cast<float>(resultData[i]));
  }
  return 0;
}

// One launch of the repeatable executor, then the output (the memory of `result`) printed.
int LaunchAndPrint(int round, aclOpExecutor* executor, void* workspaceAddr, uint64_t workspaceSize,
                   aclrtStream stream, const SampleTensors& tensors, const aclTensor* result) {
  CHECK_ACL(aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream));
  CHECK_ACL(aclrtSynchronizeStream(stream));
  return PrintResult(round, tensors, result);
}

int RepeatableExecutorRounds(aclrtStream stream) {
  const std::vector<int64_t> shape = {2, 4};
  SampleTensors tensors;
  aclTensor* gradOutput = tensors.Create(std::vector<op::fp16_t>{1, 1, 1, 1, 0.5, -2, 3.25, 1e-3}, shape, ACL_FLOAT16);
  aclTensor* self = tensors.Create(std::vector<op::fp16_t>{1, 2, 3, 4, -1.5, 0.25, -6, 10}, shape, ACL_FLOAT16);
  aclTensor* gradInput = tensors.Zeros<op::fp16_t>(shape, ACL_FLOAT16);
  // Round 1's buffers: new self data and a new output, swapped into the same executor.
  aclTensor* nextSelf = tensors.Create(std::vector<op::fp16_t>{0.5, -0.5, 7, -3, 2.5, 0, 1.75, -0.125}, shape,
                                       ACL_FLOAT16);
  aclTensor* nextGradInput = tensors.Zeros<op::fp16_t>(shape, ACL_FLOAT16);
  CHECK_RET(gradOutput && self && gradInput && nextSelf && nextGradInput, return 1);

  // First phase once; the executor is made repeatable right after it.
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;
  CHECK_ACL(aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor));
  CHECK_ACL(aclSetAclOpExecutorRepeatable(executor));
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) CHECK_ACL(aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));

  // Round 0: the addresses of the first phase.
  int failures = LaunchAndPrint(0, executor, workspaceAddr, workspaceSize, stream, tensors, gradInput);
  // Round 1: the new buffers.
  CHECK_ACL(aclSetInputTensorAddr(executor, 1, self, tensors.DeviceAddr(nextSelf)));
  CHECK_ACL(aclSetOutputTensorAddr(executor, 0, gradInput, tensors.DeviceAddr(nextGradInput)));
  failures += LaunchAndPrint(1, executor, workspaceAddr, workspaceSize, stream, tensors, nextGradInput);
  // Round 2: the first buffers again; the round-0 output is overwritten with the same values.
  CHECK_ACL(aclSetInputTensorAddr(executor, 1, self, tensors.DeviceAddr(self)));
  CHECK_ACL(aclSetOutputTensorAddr(executor, 0, gradInput, tensors.DeviceAddr(gradInput)));
  const size_t bytes = GetShapeSize(shape) * sizeof(op::fp16_t);
  CHECK_ACL(aclrtMemset(tensors.DeviceAddr(gradInput), bytes, 0, bytes));
  failures += LaunchAndPrint(2, executor, workspaceAddr, workspaceSize, stream, tensors, gradInput);

  // A repeatable executor lives until it is destroyed; afterwards it is gone.
  CHECK_ACL(aclDestroyAclOpExecutor(executor));
  CHECK_RET(aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream) != ACL_SUCCESS,
            LOG_PRINT("a destroyed executor launched\n"); ++failures);
  (void)aclGetRecentErrMsg();
  if (workspaceAddr) aclrtFree(workspaceAddr);
  return failures;
}

int main() { return RunSample("silu_backward_fp16", RepeatableExecutorRounds); }
