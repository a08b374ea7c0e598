/* A CANN program as the vendor's own examples write it (cann-ops' AclNNInvocationNaive main.cpp files,
 * ops-nn's modulate_grad example): every aclTensor is contiguous and created with strides == nullptr.
 * Checks that aclCreateTensor accepts it, that aclGetViewStrides returns the row-major strides of the
 * view dims (a 0-sized dimension counts as 1), and that aclnnSiluBackward on such tensors (2, 3, 4)
 * gives SiLU backward computed in float64 here. Non-zero exit on any failure. */
#include <cmath>
#include <cstdlib>
#include <vector>

#include "aclnn_silu_backward.h"
#include "sample_common.h"

namespace {

// The vendor examples' helper, strides passed as nullptr.
int CreateContiguousTensor(const std::vector<float>& hostData, const std::vector<int64_t>& shape, void** deviceAddr,
                           aclTensor** tensor) {
  const size_t bytes = hostData.size() * sizeof(float);
  CHECK_ACL(aclrtMalloc(deviceAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMemcpy(*deviceAddr, bytes, hostData.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  *tensor = aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape.data(),
                            shape.size(), *deviceAddr);
  CHECK_RET(*tensor != nullptr, LOG_PRINT("aclCreateTensor(strides = nullptr) failed. %s\n", RecentErrMsg()); return 1);
  return 0;
}

// aclGetViewStrides of a tensor made with strides == nullptr over `shape` equals `want`.
int CheckStrides(const std::vector<int64_t>& shape, const std::vector<int64_t>& want) {
  float one = 0.0f;
  const std::vector<int64_t> storage = {1};
  aclTensor* t = aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage.data(),
                                 storage.size(), &one);
  CHECK_RET(t != nullptr, LOG_PRINT("aclCreateTensor(strides = nullptr) failed. %s\n", RecentErrMsg()); return 1);
  int64_t* strides = nullptr;
  uint64_t count = 0;
  int failures = aclGetViewStrides(t, &strides, &count) == ACL_SUCCESS ? 0 : 1;
  if (failures == 0 && count != want.size()) failures = 1;
  for (size_t d = 0; failures == 0 && d < want.size(); ++d) {
    LOG_PRINT("stride[%zu] is: %lld\n", d, static_cast<long long>(strides[d]));
    if (strides[d] != want[d]) failures = 1;
  }
  if (failures) LOG_PRINT("FAIL: aclGetViewStrides of a tensor created with strides == nullptr\n");
  free(strides);
  aclDestroyTensor(t);
  return failures;
}

int NullStridesSample(aclrtStream stream) {
  int failures = CheckStrides({2, 3, 4}, {12, 4, 1}) + CheckStrides({5}, {1}) + CheckStrides({3, 0, 2}, {2, 2, 1}) +
                 CheckStrides({}, {});
  // Strides that would not fit int64: refused (NULL and a message), never wrapped around.
  const std::vector<int64_t> huge = {2, int64_t(1) << 40, int64_t(1) << 40};
  float one = 0.0f;
  if (aclCreateTensor(huge.data(), huge.size(), ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, huge.data(), 1, &one) !=
      nullptr) {
    LOG_PRINT("FAIL: contiguous strides of [2, 2^40, 2^40] overflow int64 but the tensor was created\n");
    ++failures;
  } else {
    LOG_PRINT("overflowing strides refused: %s\n", RecentErrMsg());
  }

  const std::vector<int64_t> shape = {2, 3, 4};
  const std::vector<double> dy = Wave(24, 1.5, 0.3), x = Wave(24, 4.0, 1.1);
  const std::vector<float> dyStored = StoredAs<float>(dy), xStored = StoredAs<float>(x);
  void* dyAddr = nullptr;
  void* xAddr = nullptr;
  void* dxAddr = nullptr;
  aclTensor* gradOutput = nullptr;
  aclTensor* self = nullptr;
  aclTensor* gradInput = nullptr;
  CHECK_RET(CreateContiguousTensor(dyStored, shape, &dyAddr, &gradOutput) == 0 &&
                CreateContiguousTensor(xStored, shape, &xAddr, &self) == 0 &&
                CreateContiguousTensor(std::vector<float>(24, 0.0f), shape, &dxAddr, &gradInput) == 0,
            return failures + 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor);
  if (LaunchAndWait("aclnnSiluBackward", ret, workspaceSize, executor, aclnnSiluBackward, stream) != 0) ++failures;

  std::vector<float> dx(24);
  CHECK_ACL(aclrtMemcpy(dx.data(), 24 * sizeof(float), dxAddr, 24 * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
  std::vector<double> want(24);
  const std::vector<double> dyExact = AsDouble(dyStored), xExact = AsDouble(xStored);
  for (size_t i = 0; i < 24; ++i) {
    const double s = 1.0 / (1.0 + std::exp(-xExact[i]));
    want[i] = dyExact[i] * s * (1.0 + xExact[i] * (1.0 - s));
  }
  failures += CheckClose("gradInput", dx, want, 2e-6, 1e-7);
  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(gradInput);
  aclrtFree(dyAddr);
  aclrtFree(xAddr);
  aclrtFree(dxAddr);
  return failures;
}

}  // namespace

int main() { return RunSample("null_strides", NullStridesSample); }
