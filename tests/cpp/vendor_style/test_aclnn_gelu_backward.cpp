/* CANN sample for aclnnGeluBackward and aclnnGeluBackwardV2 (C++11, vendor headers only): the vendor
 * documents' data, self (4, 2) float32 holding 0..7 and gradOutput all ones (the documents store these as int
 * and pass them as FLOAT; here they are float), then a negative self too. aclnnGeluBackward is the tanh form's
 * derivative; aclnnGeluBackwardV2 takes "none" (erf) or "tanh". Checked against float64 computed here from the
 * documents' formulas:
 *   erf:  dy * (1/2 + 1/2 erf(x / sqrt 2) + x / sqrt(2 pi) exp(-x^2 / 2))
 *   tanh: dy * (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'),  u = sqrt(2/pi) (x + 0.044715 x^3) */
#include <cmath>
#include <cstring>
#include <vector>

#include "aclnn_gelu_backward.h"
#include "aclnn_gelu_backward_v2.h"
#include "sample_common.h"

namespace {

const double kPi = 3.14159265358979323846;

// With s = 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): 1 - tanh^2 u = 4 s (1 - s), so the derivative is
// s + 2 x s (1 - s) u', which double evaluates without the cancellation of 1 + tanh(u) in the tail.
double GradTanh(double x) {
  const double c = std::sqrt(2.0 / kPi), s = 1.0 / (1.0 + std::exp(-2.0 * c * (x + 0.044715 * x * x * x)));
  return s + 2.0 * x * s * (1.0 - s) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
double GradErf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x / std::sqrt(2.0 * kPi) * std::exp(-0.5 * x * x); }

int Run(aclrtStream stream, const std::vector<float>& selfHostData, const char* approximate) {
  const std::vector<int64_t> shape = {4, 2};
  const std::vector<float> gradOutputHostData(8, 1.0f);
  SampleTensors tensors;
  aclTensor* gradOutput = tensors.Create(gradOutputHostData, shape, ACL_FLOAT);
  aclTensor* self = tensors.Create(selfHostData, shape, ACL_FLOAT);
  aclTensor* gradInput = tensors.Zeros<float>(shape, ACL_FLOAT);
  CHECK_RET(gradOutput && self && gradInput, return 1);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  int ret = 0;
  if (approximate == nullptr) {
    const aclnnStatus status =
        aclnnGeluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeluBackward", status, workspaceSize, executor, aclnnGeluBackward, stream);
  } else {
    std::vector<char> mode(approximate, approximate + std::strlen(approximate) + 1);  // the API takes char*
    const aclnnStatus status =
        aclnnGeluBackwardV2GetWorkspaceSize(gradOutput, self, mode.data(), gradInput, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeluBackwardV2", status, workspaceSize, executor, aclnnGeluBackwardV2, stream);
  }
  CHECK_RET(ret == 0, return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(gradInput, &result) == 0, return 1);
  const bool erf = approximate != nullptr && std::strcmp(approximate, "none") == 0;
  std::vector<double> want;
  for (size_t i = 0; i < selfHostData.size(); ++i)
    want.push_back(erf ? GradErf(selfHostData[i]) : GradTanh(selfHostData[i]));
  return CheckClose(approximate == nullptr ? "aclnnGeluBackward" : approximate, result, want, 1e-5, 1e-30);
}

int DocumentSample(aclrtStream stream) {
  const std::vector<float> doc = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<float> negative = {-0.5f, -0.75f, -1, -2, -3.5f, -5, -7, -9};
  int failures = 0;
  for (const std::vector<float>* x : {&doc, &negative})
    failures += Run(stream, *x, nullptr) + Run(stream, *x, "none") + Run(stream, *x, "tanh");
  return failures;
}

}  // namespace

int main() { return RunSample("aclnnGeluBackward", DocumentSample); }
