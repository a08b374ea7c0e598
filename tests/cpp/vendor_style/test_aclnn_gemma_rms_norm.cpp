/* CANN sample for aclnnGemmaRmsNorm (C++11, vendor headers only): x (2, 16) float32 holding 0..7 twice per
 * row and gamma (16) holding -0.5 .. 0.25 (Gemma's weights sit around 0: the operator multiplies by
 * 1 + gamma), epsilon 1e-6, rstd written as (2, 1). Checked against float64 computed here from the formula:
 *   rstd = 1 / sqrt(mean(x^2) + epsilon),   y = x * rstd * (1 + gamma). */
#include <cmath>
#include <vector>

#include "aclnn_gemma_rms_norm.h"
#include "sample_common.h"

namespace {

int DocumentSample(aclrtStream stream) {
  const int64_t rows = 2, cols = 16;
  std::vector<float> xHostData, gammaHostData;
  for (int64_t i = 0; i < rows * cols; ++i) xHostData.push_back(static_cast<float>(i % 8));
  for (int64_t i = 0; i < cols; ++i) gammaHostData.push_back(-0.5f + 0.05f * static_cast<float>(i));
  const double epsilon = 1e-6;
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHostData, {rows, cols}, ACL_FLOAT);
  aclTensor* gamma = tensors.Create(gammaHostData, {cols}, ACL_FLOAT);
  aclTensor* y = tensors.Zeros<float>({rows, cols}, ACL_FLOAT);
  aclTensor* rstd = tensors.Zeros<float>({rows, 1}, ACL_FLOAT);
  CHECK_RET(x && gamma && y && rstd, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnGemmaRmsNormGetWorkspaceSize(x, gamma, epsilon, y, rstd, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnGemmaRmsNorm", ret, workspaceSize, executor, aclnnGemmaRmsNorm, stream) == 0,
            return 1);
  std::vector<float> yResult, rstdResult;
  CHECK_RET(tensors.Read(y, &yResult) == 0 && tensors.Read(rstd, &rstdResult) == 0, return 1);
  std::vector<double> yWant, rstdWant;
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (int64_t i = 0; i < cols; ++i) squares += static_cast<double>(xHostData[r * cols + i]) * xHostData[r * cols + i];
    const double s = 1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon);
    rstdWant.push_back(s);
    for (int64_t i = 0; i < cols; ++i) yWant.push_back(xHostData[r * cols + i] * s * (1.0 + gammaHostData[i]));
  }
  return CheckClose("y", yResult, yWant, 1e-6, 1e-6) + CheckClose("rstd", rstdResult, rstdWant, 1e-6, 0.0);
}

}  // namespace

int main() { return RunSample("aclnnGemmaRmsNorm", DocumentSample); }
