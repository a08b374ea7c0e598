/* The flow of the vendor's aclSetInputTensorAddr sample (C++11): tensors are created without data
 * (nullptr), the first phase runs once, the executor is made repeatable, and every launch first gives
 * the tensors their device addresses. Two iterations of a "training loop" with fresh buffers each.
 * Prints "step S result[i] is: v" for aclnnSiluBackward (float32); non-zero exit on a failed call. */
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnn_silu_backward.h"
#include "sample_common.h"

int main() {
  aclrtStream stream;
  CHECK_RET(Init(0, &stream) == 0, return 1);

  std::vector<int64_t> shape = {1, 2, 3};
  std::vector<int64_t> strides = {6, 3, 1};
  aclTensor* gradOutput = aclCreateTensor(shape.data(), shape.size(), aclDataType::ACL_FLOAT, strides.data(), 0,
                                          aclFormat::ACL_FORMAT_ND, shape.data(), shape.size(), nullptr);
  aclTensor* self = aclCreateTensor(shape.data(), shape.size(), aclDataType::ACL_FLOAT, strides.data(), 0,
                                    aclFormat::ACL_FORMAT_ND, shape.data(), shape.size(), nullptr);
  aclTensor* gradInput = aclCreateTensor(shape.data(), shape.size(), aclDataType::ACL_FLOAT, strides.data(), 0,
                                         aclFormat::ACL_FORMAT_ND, shape.data(), shape.size(), nullptr);
  CHECK_RET(gradOutput && self && gradInput, LOG_PRINT("aclCreateTensor failed\n"); return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;
  auto ret = aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("GetWorkspaceSize failed. ERROR: %d\n", ret); return 1);
  ret = aclSetAclOpExecutorRepeatable(executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclSetAclOpExecutorRepeatable failed. ERROR: %d\n", ret); return 1);
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    CHECK_RET(aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, return 1);
  }
  // Without addresses the launch is refused, and the executor stays usable.
  ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACLNN_ERR_PARAM_NULLPTR, LOG_PRINT("launch without data returned %d\n", ret); return 1);
  (void)aclGetRecentErrMsg();

  const size_t bytes = 6 * sizeof(float);
  for (int step = 0; step < 2; ++step) {
    std::vector<float> gradHost(6), selfHost(6), outHost(6, 0.0f);
    for (int i = 0; i < 6; ++i) {
      gradHost[i] = 0.5f * (i + 1) * (step + 1);
      selfHost[i] = -2.5f + i + 0.25f * step;
    }
    void* gradAddr = nullptr;
    void* selfAddr = nullptr;
    void* outAddr = nullptr;
    CHECK_RET(aclrtMalloc(&gradAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, return 1);
    CHECK_RET(aclrtMalloc(&selfAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, return 1);
    CHECK_RET(aclrtMalloc(&outAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, return 1);
    CHECK_RET(aclrtMemcpy(gradAddr, bytes, gradHost.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, return 1);
    CHECK_RET(aclrtMemcpy(selfAddr, bytes, selfHost.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, return 1);
    CHECK_RET(aclSetInputTensorAddr(executor, 0, gradOutput, gradAddr) == ACL_SUCCESS, return 1);
    CHECK_RET(aclSetInputTensorAddr(executor, 1, self, selfAddr) == ACL_SUCCESS, return 1);
    CHECK_RET(aclSetOutputTensorAddr(executor, 0, gradInput, outAddr) == ACL_SUCCESS, return 1);
    ret = aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnSiluBackward failed. ERROR: %d\n", ret); return 1);
    CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, return 1);
    CHECK_RET(aclrtMemcpy(outHost.data(), bytes, outAddr, bytes, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS, return 1);
    for (int i = 0; i < 6; ++i) {
      LOG_PRINT("step %d result[%d] is: %.9g\n", step, i, outHost[i]);
    }
    aclrtFree(gradAddr);
    aclrtFree(selfAddr);
    aclrtFree(outAddr);
  }

  CHECK_RET(aclDestroyAclOpExecutor(executor) == ACL_SUCCESS, return 1);
  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(gradInput);
  if (workspaceSize > 0) {
    aclrtFree(workspaceAddr);
  }
  Finalize(0, stream);
  return 0;
}
