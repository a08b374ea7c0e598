/* CANN sample for aclnnSwiGluGrad (C++11, vendor headers only): the vendor document's sample, yGrad (2, 16)
 * and x (2, 32) float32 holding -2, -1, 0, 1, ... (its out buffer lists 32 zeros for the 64 elements of
 * out (2, 32): made at its right size here), dim -1. Checked against float64 computed here from the
 * document's formulas: (a, b) = the halves of each row of x, s = sigmoid(a),
 *   out = cat(yGrad * b * s * (1 + a * (1 - s)), yGrad * a * s). */
#include <cmath>
#include <vector>

#include "aclnn_swi_glu_grad.h"
#include "sample_common.h"

namespace {

int DocumentSample(aclrtStream stream) {
  const int64_t rows = 2, half = 16;
  std::vector<float> yGradHostData(static_cast<size_t>(rows * half)), xHostData(static_cast<size_t>(rows * 2 * half));
  for (size_t i = 0; i < yGradHostData.size(); ++i) yGradHostData[i] = static_cast<float>(i) - 2;
  for (size_t i = 0; i < xHostData.size(); ++i) xHostData[i] = static_cast<float>(i) - 2;
  const int64_t dim = -1;
  SampleTensors tensors;
  aclTensor* yGrad = tensors.Create(yGradHostData, {rows, half}, ACL_FLOAT);
  aclTensor* x = tensors.Create(xHostData, {rows, 2 * half}, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>({rows, 2 * half}, ACL_FLOAT);
  CHECK_RET(yGrad && x && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnSwiGluGradGetWorkspaceSize(yGrad, x, dim, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnSwiGluGrad", ret, workspaceSize, executor, aclnnSwiGluGrad, stream) == 0, return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  std::vector<double> want(xHostData.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double dy = yGradHostData[r * half + i];
      const double a = xHostData[r * 2 * half + i], b = xHostData[r * 2 * half + half + i];
      const double s = 1.0 / (1.0 + std::exp(-a));
      want[r * 2 * half + i] = dy * b * s * (1.0 + a * (1.0 - s));
      want[r * 2 * half + half + i] = dy * a * s;
    }
  return CheckClose("out", result, want, 1e-6, 1e-6 * MaxAbs(want));
}

}  // namespace

int main() { return RunSample("aclnnSwiGluGrad", DocumentSample); }
