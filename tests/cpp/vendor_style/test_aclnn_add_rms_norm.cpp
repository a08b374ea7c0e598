/* CANN sample for aclnnAddRmsNorm (C++11, vendor headers only). First the vendor document's own sample:
 * x1 = x2 (2, 16) and gamma (16) float32 with the document's values, epsilon 1e-6, rstd written as (2, 1).
 * Then bfloat16 x1, x2 (3, 4, 8) with gamma (4, 8) (normalised over the two trailing dims, rstd (3, 1, 1)
 * in float32). Each result is checked against float64 computed here from the document's formulas:
 *   x = x1 + x2,   rstd = 1 / sqrt(mean(x^2 over gamma's dims) + epsilon),   y = x * rstd * gamma. */
#include <cmath>
#include <vector>

#include "aclnn_add_rms_norm.h"
#include "aclnn/opdev/bfloat16.h"
#include "sample_common.h"

namespace {

// float64 x = x1 + x2, y and rstd of rows of `cols` elements. `xRounded` is the sum as the device
// stores it (x1's dtype): the normalisation is of that stored sum.
void AddRmsNormReference(const std::vector<double>& xRounded, const std::vector<double>& gamma, double epsilon,
                         std::vector<double>* y, std::vector<double>* rstd) {
  const size_t cols = gamma.size(), rows = xRounded.size() / cols;
  y->assign(xRounded.size(), 0.0);
  rstd->assign(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (size_t i = 0; i < cols; ++i) squares += xRounded[r * cols + i] * xRounded[r * cols + i];
    (*rstd)[r] = 1.0 / std::sqrt(squares / static_cast<double>(cols) + epsilon);
    for (size_t i = 0; i < cols; ++i) (*y)[r * cols + i] = xRounded[r * cols + i] * (*rstd)[r] * gamma[i];
  }
}

template <typename T>
int RunAddRmsNorm(aclrtStream stream, const char* what, aclDataType dataType, const std::vector<T>& x1Host,
                  const std::vector<T>& x2Host, const std::vector<int64_t>& xShape, const std::vector<T>& gammaHost,
                  const std::vector<int64_t>& gammaShape, const std::vector<int64_t>& rstdShape, double epsilon,
                  double rtol) {
  SampleTensors tensors;
  aclTensor* x1 = tensors.Create(x1Host, xShape, dataType);
  aclTensor* x2 = tensors.Create(x2Host, xShape, dataType);
  aclTensor* gamma = tensors.Create(gammaHost, gammaShape, dataType);
  aclTensor* y = tensors.Zeros<T>(xShape, dataType);
  aclTensor* rstd = tensors.Zeros<float>(rstdShape, ACL_FLOAT);
  aclTensor* x = tensors.Zeros<T>(xShape, dataType);
  CHECK_RET(x1 && x2 && gamma && y && rstd && x, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret =
      aclnnAddRmsNormGetWorkspaceSize(x1, x2, gamma, epsilon, y, rstd, x, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnAddRmsNorm", ret, workspaceSize, executor, aclnnAddRmsNorm, stream) == 0, return 1);
  std::vector<T> yResult, xResult;
  std::vector<float> rstdResult;
  CHECK_RET(tensors.Read(y, &yResult) == 0 && tensors.Read(rstd, &rstdResult) == 0 &&
                tensors.Read(x, &xResult) == 0,
            return 1);
  // The sum, rounded once to the dtype, as stored in xOut (exact in float64 before the rounding).
  const std::vector<double> a = AsDouble(x1Host), b = AsDouble(x2Host);
  std::vector<T> sumStored(a.size());
  for (size_t i = 0; i < a.size(); ++i) sumStored[i] = static_cast<T>(static_cast<float>(a[i] + b[i]));
  const std::vector<double> sumWant = AsDouble(sumStored);
  std::vector<double> yWant, rstdWant;
  AddRmsNormReference(sumWant, AsDouble(gammaHost), epsilon, &yWant, &rstdWant);
  const double atol = 1e-6 * MaxAbs(yWant);
  return CheckClose("xOut", xResult, sumWant, 0.0, 0.0) + CheckClose(what, yResult, yWant, rtol, atol) +
         CheckClose("rstd", rstdResult, rstdWant, 1e-6, 0.0);
}

int DocumentSample(aclrtStream stream) {
  const std::vector<float> xHostData = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,
                                        0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<float> gammaHostData = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
  return RunAddRmsNorm(stream, "y", ACL_FLOAT, xHostData, xHostData, {2, 16}, gammaHostData, {16}, {2, 1}, 1e-6,
                       1e-6);
}

int TwoTrailingDimsBf16(aclrtStream stream) {
  const std::vector<op::bfloat16> x1Host = StoredAs<op::bfloat16>(Wave(3 * 4 * 8, 3.0, 0.2, 0.5));
  const std::vector<op::bfloat16> x2Host = StoredAs<op::bfloat16>(Wave(3 * 4 * 8, 1.5, 0.7, -0.25));
  const std::vector<op::bfloat16> gammaHost = StoredAs<op::bfloat16>(Wave(4 * 8, 0.5, 1.1, 1.0));
  // bf16 y rounded once (8 significant bits)
  return RunAddRmsNorm(stream, "bf16 y", ACL_BF16, x1Host, x2Host, {3, 4, 8}, gammaHost, {4, 8}, {3, 1, 1}, 1e-5,
                       1.0 / 128);
}

int AddRmsNormSample(aclrtStream stream) { return DocumentSample(stream) + TwoTrailingDimsBf16(stream); }

}  // namespace

int main() { return RunSample("aclnnAddRmsNorm", AddRmsNormSample); }
