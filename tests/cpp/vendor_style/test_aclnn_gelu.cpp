/* CANN sample for aclnnGelu and aclnnGeluV2 (C++11, vendor headers only): the vendor documents' data, self
 * (4, 2) float32 {1.3, 2.5, 6.7, -4, -1.4, -1.6, -8, -16.9}; aclnnGelu (the tanh form), then aclnnGeluV2 with
 * approximate 0 (erf) and 1 (tanh). Checked against float64 computed here from the documents' formulas:
 *   tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))      erf: x / 2 * (1 + erf(x / sqrt 2))
 * (1 + tanh(u) evaluated as 2 / (1 + exp(-2u)) and 1 + erf(x / sqrt 2) as erfc(-x / sqrt 2): the negative
 * tail without cancellation). */
#include <cmath>
#include <vector>

#include "aclnn_gelu.h"
#include "aclnn_gelu_v2.h"
#include "sample_common.h"

namespace {

const double kPi = 3.14159265358979323846;

// 0.5 (1 + tanh u) written as 1 / (1 + exp(-2u)) (the same function), so that double keeps its
// relative accuracy where 1 + tanh(u) would cancel (x = -8: tanh(u) rounds to -1).
double GeluTanh(double x) {
  return x / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
}
double GeluErf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

int Run(aclrtStream stream, int version, int64_t approximate) {
  const std::vector<int64_t> shape = {4, 2};
  const std::vector<float> selfHostData = {1.3f, 2.5f, 6.7f, -4.0f, -1.4f, -1.6f, -8.0f, -16.9f};
  SampleTensors tensors;
  aclTensor* self = tensors.Create(selfHostData, shape, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>(shape, ACL_FLOAT);
  CHECK_RET(self && out, return 1);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  int ret = 0;
  if (version == 1) {
    const aclnnStatus status = aclnnGeluGetWorkspaceSize(self, out, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGelu", status, workspaceSize, executor, aclnnGelu, stream);
  } else {
    const aclnnStatus status = aclnnGeluV2GetWorkspaceSize(self, approximate, out, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeluV2", status, workspaceSize, executor, aclnnGeluV2, stream);
  }
  CHECK_RET(ret == 0, return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  std::vector<double> want;
  for (size_t i = 0; i < selfHostData.size(); ++i)
    want.push_back(approximate == 1 ? GeluTanh(selfHostData[i]) : GeluErf(selfHostData[i]));
  return CheckClose(version == 1 ? "aclnnGelu" : (approximate == 1 ? "aclnnGeluV2 tanh" : "aclnnGeluV2 none"), result,
                    want, 1e-5, 1e-30);
}

int DocumentSample(aclrtStream stream) { return Run(stream, 1, 1) + Run(stream, 2, 0) + Run(stream, 2, 1); }

}  // namespace

int main() { return RunSample("aclnnGelu", DocumentSample); }
