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
#include "sample_common.h"  // CHECK_RET, LOG_PRINT, Init, CreateAclTensor (in the sample project: inc/)

int PrintResult(int round, void* deviceAddr, const std::vector<int64_t>& shape) {
  auto size = GetShapeSize(shape);
  std::vector<op::fp16_t> resultData(size, 0);
  auto ret = aclrtMemcpy(resultData.data(), resultData.size() * sizeof(resultData[0]), deviceAddr,
                         size * sizeof(resultData[0]), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy result from device to host failed. ERROR: %d\n", ret); return ret);
  for (int64_t i = 0; i < size; i++) {
    LOG_PRINT("round %d result[%ld] is: %.9g\n", round, static_cast<long>(i), static_cast<float>(resultData[i]));
  }
  return 0;
}

int main() {
  int32_t deviceId = 0;
  aclrtStream stream;
  auto ret = Init(deviceId, &stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("Init acl failed. ERROR: %d\n", ret); return ret);

  std::vector<int64_t> shape = {2, 4};
  std::vector<op::fp16_t> gradOutputHostData = {1, 1, 1, 1, 0.5, -2, 3.25, 1e-3};
  std::vector<op::fp16_t> selfHostData = {1, 2, 3, 4, -1.5, 0.25, -6, 10};
  std::vector<op::fp16_t> gradInputHostData(8, 0);
  void* gradOutputDeviceAddr = nullptr;
  void* selfDeviceAddr = nullptr;
  void* gradInputDeviceAddr = nullptr;
  aclTensor* gradOutput = nullptr;
  aclTensor* self = nullptr;
  aclTensor* gradInput = nullptr;
  ret = CreateAclTensor(gradOutputHostData, shape, &gradOutputDeviceAddr, aclDataType::ACL_FLOAT16, &gradOutput);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(selfHostData, shape, &selfDeviceAddr, aclDataType::ACL_FLOAT16, &self);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(gradInputHostData, shape, &gradInputDeviceAddr, aclDataType::ACL_FLOAT16, &gradInput);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  // First phase once; the executor is made repeatable right after it.
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;
  ret = aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnSiluBackwardGetWorkspaceSize failed. ERROR: %d\n", ret); return ret);
  ret = aclSetAclOpExecutorRepeatable(executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclSetAclOpExecutorRepeatable failed. ERROR: %d\n", ret); return ret);
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    ret = aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret); return ret);
  }

  // Round 0: the addresses of the first phase.
  ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnSiluBackward failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSynchronizeStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret); return ret);
  ret = PrintResult(0, gradInputDeviceAddr, shape);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  // Round 1: new self data in a new buffer, a new output buffer, same executor.
  std::vector<op::fp16_t> nextSelfHostData = {0.5, -0.5, 7, -3, 2.5, 0, 1.75, -0.125};
  void* nextSelfDeviceAddr = nullptr;
  void* nextGradInputDeviceAddr = nullptr;
  size_t bytes = nextSelfHostData.size() * sizeof(op::fp16_t);
  ret = aclrtMalloc(&nextSelfDeviceAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclrtMalloc(&nextGradInputDeviceAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclrtMemcpy(nextSelfDeviceAddr, bytes, nextSelfHostData.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclSetInputTensorAddr(executor, 1, self, nextSelfDeviceAddr);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclSetInputTensorAddr failed. ERROR: %d\n", ret); return ret);
  ret = aclSetOutputTensorAddr(executor, 0, gradInput, nextGradInputDeviceAddr);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclSetOutputTensorAddr failed. ERROR: %d\n", ret); return ret);
  ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnSiluBackward (round 1) failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSynchronizeStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = PrintResult(1, nextGradInputDeviceAddr, shape);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  // Round 2: the first buffers again; the round-0 output is overwritten with the same values.
  ret = aclSetInputTensorAddr(executor, 1, self, selfDeviceAddr);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclSetOutputTensorAddr(executor, 0, gradInput, gradInputDeviceAddr);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclrtMemset(gradInputDeviceAddr, bytes, 0, bytes);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnSiluBackward (round 2) failed. ERROR: %d\n", ret); return ret);
  ret = PrintResult(2, gradInputDeviceAddr, shape);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  // A repeatable executor lives until it is destroyed; afterwards it is gone.
  ret = aclDestroyAclOpExecutor(executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclDestroyAclOpExecutor failed. ERROR: %d\n", ret); return ret);
  ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret != ACL_SUCCESS, LOG_PRINT("a destroyed executor launched\n"); return 1);
  (void)aclGetRecentErrMsg();

  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(gradInput);
  aclrtFree(gradOutputDeviceAddr);
  aclrtFree(selfDeviceAddr);
  aclrtFree(gradInputDeviceAddr);
  aclrtFree(nextSelfDeviceAddr);
  aclrtFree(nextGradInputDeviceAddr);
  if (workspaceSize > 0) {
    aclrtFree(workspaceAddr);
  }
  Finalize(deviceId, stream);
  return 0;
}
