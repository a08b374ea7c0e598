/* CANN sample for aclnnGeGluV3 and aclnnGeGluV3Backward, and for aclnnGeGlu and aclnnGeGluBackward (the V3
 * operators without activateLeft: the right half activated) (C++11, vendor headers only): the vendor documents'
 * data, self (2, 2) float32 {0, 1, 2, 3} for the forward and {-2, -1, 0, 1} with gradOutput {-2, -1} and gelu
 * {-2, -1} for the backward, dim -1, approximate 1 (tanh), activateLeft false; then the same with activateLeft
 * true and approximate 0 (erf); then aclnnGeGlu / aclnnGeGluBackward with approximate 0. Checked against
 * float64 computed here from the documents' formulas: with A, B the halves of each row, out = A * gelu(B)
 * (activateLeft false) or gelu(A) * B, outGelu = gelu of the activated half; gradInput = dy * gelu (linear
 * half) and dy * linear * gelu'(activated half). */
#include <cmath>
#include <vector>

#include "aclnn_geglu.h"
#include "aclnn_geglu_backward.h"
#include "sample_common.h"

namespace {

const double kPi = 3.14159265358979323846;

double Gelu(double x, int64_t approximate) {
  if (approximate == 0) return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  return x / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));  // = 0.5 x (1 + tanh u)
}

double GeluGrad(double x, int64_t approximate) {
  if (approximate == 0) return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x / std::sqrt(2.0 * kPi) * std::exp(-0.5 * x * x);
  const double c = std::sqrt(2.0 / kPi), s = 1.0 / (1.0 + std::exp(-2.0 * c * (x + 0.044715 * x * x * x)));
  return s + 2.0 * x * s * (1.0 - s) * c * (1.0 + 3.0 * 0.044715 * x * x);  // s = 0.5 (1 + tanh u)
}

// v3 false: aclnnGeGlu (no activateLeft parameter; activateLeft must be false).
int Forward(aclrtStream stream, int64_t approximate, bool activateLeft, bool v3) {
  const std::vector<float> selfHostData = {0, 1, 2, 3};
  const int64_t dim = -1;
  SampleTensors tensors;
  aclTensor* self = tensors.Create(selfHostData, {2, 2}, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>({2, 1}, ACL_FLOAT);
  aclTensor* outGelu = tensors.Zeros<float>({2, 1}, ACL_FLOAT);
  CHECK_RET(self && out && outGelu, return 1);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  int ret = 0;
  if (v3) {
    const aclnnStatus status =
        aclnnGeGluV3GetWorkspaceSize(self, dim, approximate, activateLeft, out, outGelu, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeGluV3", status, workspaceSize, executor, aclnnGeGluV3, stream);
  } else {
    const aclnnStatus status =
        aclnnGeGluGetWorkspaceSize(self, dim, approximate, out, outGelu, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeGlu", status, workspaceSize, executor, aclnnGeGlu, stream);
  }
  CHECK_RET(ret == 0, return 1);
  std::vector<float> outData, geluData;
  CHECK_RET(tensors.Read(out, &outData) == 0 && tensors.Read(outGelu, &geluData) == 0, return 1);
  std::vector<double> wantOut, wantGelu;
  for (int r = 0; r < 2; ++r) {
    const double a = selfHostData[2 * r], b = selfHostData[2 * r + 1];
    const double g = Gelu(activateLeft ? a : b, approximate);
    wantGelu.push_back(g);
    wantOut.push_back(g * (activateLeft ? b : a));
  }
  return CheckClose("out", outData, wantOut, 1e-5, 1e-30) + CheckClose("outGelu", geluData, wantGelu, 1e-5, 1e-30);
}

// v3 false: aclnnGeGluBackward (no activateLeft parameter; activateLeft must be false).
int Backward(aclrtStream stream, int64_t approximate, bool activateLeft, bool v3) {
  const std::vector<float> gradOutputHostData = {-2, -1}, selfHostData = {-2, -1, 0, 1}, geluHostData = {-2, -1};
  const int64_t dim = -1;
  SampleTensors tensors;
  aclTensor* gradOutput = tensors.Create(gradOutputHostData, {2, 1}, ACL_FLOAT);
  aclTensor* self = tensors.Create(selfHostData, {2, 2}, ACL_FLOAT);
  aclTensor* gelu = tensors.Create(geluHostData, {2, 1}, ACL_FLOAT);
  aclTensor* gradInput = tensors.Zeros<float>({2, 2}, ACL_FLOAT);
  CHECK_RET(gradOutput && self && gelu && gradInput, return 1);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  int ret = 0;
  if (v3) {
    const aclnnStatus status = aclnnGeGluV3BackwardGetWorkspaceSize(gradOutput, self, gelu, dim, approximate,
                                                                    activateLeft, gradInput, &workspaceSize, &executor);
    ret = LaunchAndWait("aclnnGeGluV3Backward", status, workspaceSize, executor, aclnnGeGluV3Backward, stream);
  } else {
    const aclnnStatus status =
        aclnnGeGluBackwardGetWorkspaceSize(gradOutput, self, gelu, dim, approximate, gradInput, &workspaceSize,
                                           &executor);
    ret = LaunchAndWait("aclnnGeGluBackward", status, workspaceSize, executor, aclnnGeGluBackward, stream);
  }
  CHECK_RET(ret == 0, return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(gradInput, &result) == 0, return 1);
  std::vector<double> want(4);
  for (int r = 0; r < 2; ++r) {
    const double dy = gradOutputHostData[r], a = selfHostData[2 * r], b = selfHostData[2 * r + 1];
    const double h = activateLeft ? a : b, l = activateLeft ? b : a;
    const double dh = dy * l * GeluGrad(h, approximate), dl = dy * geluHostData[r];
    want[2 * r] = activateLeft ? dh : dl;
    want[2 * r + 1] = activateLeft ? dl : dh;
  }
  return CheckClose("gradInput", result, want, 1e-5, 1e-30);
}

int DocumentSample(aclrtStream stream) {
  return Forward(stream, 1, false, true) + Backward(stream, 1, false, true) + Forward(stream, 0, true, true) +
         Backward(stream, 0, true, true) + Forward(stream, 0, false, false) + Backward(stream, 0, false, false);
}

}  // namespace

int main() { return RunSample("aclnnGeGluV3", DocumentSample); }
