/* CANN sample for aclnnRmsNorm (C++11, vendor headers only). First the vendor document's own sample:
 * x (2, 16) and gamma (16) float32 with the document's values, epsilon 1e-6, rstd written as (2, 1). Then
 * bfloat16 x (3, 4, 8) with gamma (4, 8) (normalised over the two trailing dims, rstd (3, 1, 1) in
 * float32). Each result is checked against float64 computed here from the document's formulas:
 *   rstd = 1 / sqrt(mean(x^2 over gamma's dims) + epsilon),   y = x * rstd * gamma. */
#include <cmath>
#include <vector>

#include "aclnn_rms_norm.h"
#include "aclnn/opdev/bfloat16.h"
#include "sample_common.h"

namespace {

// float64 y and rstd of rows of `cols` elements.
void RmsNormReference(const std::vector<double>& x, const std::vector<double>& gamma, double epsilon,
                      std::vector<double>* y, std::vector<double>* rstd) {
  const size_t cols = gamma.size(), rows = x.size() / cols;
  y->assign(x.size(), 0.0);
  rstd->assign(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (size_t i = 0; i < cols; ++i) squares += x[r * cols + i] * x[r * cols + i];
    (*rstd)[r] = 1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon);
    for (size_t i = 0; i < cols; ++i) (*y)[r * cols + i] = x[r * cols + i] * (*rstd)[r] * gamma[i];
  }
}

template <typename T>
int RunRmsNorm(aclrtStream stream, const char* what, aclDataType dataType, const std::vector<T>& xHost,
               const std::vector<int64_t>& xShape, const std::vector<T>& gammaHost,
               const std::vector<int64_t>& gammaShape, const std::vector<int64_t>& rstdShape, double epsilon,
               double rtol) {
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHost, xShape, dataType);
  aclTensor* gamma = tensors.Create(gammaHost, gammaShape, dataType);
  aclTensor* y = tensors.Zeros<T>(xShape, dataType);
  aclTensor* rstd = tensors.Zeros<float>(rstdShape, ACL_FLOAT);
  CHECK_RET(x && gamma && y && rstd, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnRmsNormGetWorkspaceSize(x, gamma, epsilon, y, rstd, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnRmsNorm", ret, workspaceSize, executor, aclnnRmsNorm, stream) == 0, return 1);
  std::vector<T> yResult;
  std::vector<float> rstdResult;
  CHECK_RET(tensors.Read(y, &yResult) == 0 && tensors.Read(rstd, &rstdResult) == 0, return 1);
  std::vector<double> yWant, rstdWant;
  RmsNormReference(AsDouble(xHost), AsDouble(gammaHost), epsilon, &yWant, &rstdWant);
  const double atol = 1e-6 * MaxAbs(yWant);
  return CheckClose(what, yResult, yWant, rtol, atol) + CheckClose("rstd", rstdResult, rstdWant, 1e-6, 0.0);
}

int DocumentSample(aclrtStream stream) {
  const std::vector<float> xHostData = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,
                                        0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<float> gammaHostData = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
  return RunRmsNorm(stream, "y", ACL_FLOAT, xHostData, {2, 16}, gammaHostData, {16}, {2, 1}, 1e-6, 1e-6);
}

int TwoTrailingDimsBf16(aclrtStream stream) {
  const std::vector<op::bfloat16> xHost = StoredAs<op::bfloat16>(Wave(3 * 4 * 8, 3.0, 0.2, 0.5));
  const std::vector<op::bfloat16> gammaHost = StoredAs<op::bfloat16>(Wave(4 * 8, 0.5, 1.1, 1.0));
  // bf16 y rounded once (8 significant bits)
  return RunRmsNorm(stream, "bf16 y", ACL_BF16, xHost, {3, 4, 8}, gammaHost, {4, 8}, {3, 1, 1}, 1e-5, 1.0 / 128);
}

int RmsNormSample(aclrtStream stream) { return DocumentSample(stream) + TwoTrailingDimsBf16(stream); }

}  // namespace

int main() { return RunSample("aclnnRmsNorm", RmsNormSample); }
