/* CANN sample for aclnnRmsNormGrad (C++11, vendor headers only): the vendor document's own sample, dy and
 * x (2, 1, 16), rstd (2) and gamma (16) float32 with the document's values (rstd given, not computed from
 * x: the operator takes it as it is). dx and the float32 dgamma are checked against float64 computed
 * here from the document's formulas (rows of 16, xhat = x * rstd):
 *   dx = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd,   dgamma = sum over rows of dy * xhat. */
#include <cmath>
#include <vector>

#include "aclnn_rms_norm_grad.h"
#include "sample_common.h"

namespace {

void RmsNormGradReference(const std::vector<double>& dy, const std::vector<double>& x,
                          const std::vector<double>& rstd, const std::vector<double>& gamma, std::vector<double>* dx,
                          std::vector<double>* dgamma) {
  const size_t cols = gamma.size(), rows = x.size() / cols;
  dx->assign(x.size(), 0.0);
  dgamma->assign(cols, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0.0;
    for (size_t i = 0; i < cols; ++i) mean += dy[r * cols + i] * gamma[i] * x[r * cols + i] * rstd[r];
    mean /= static_cast<double>(cols);
    for (size_t i = 0; i < cols; ++i) {
      const double xhat = x[r * cols + i] * rstd[r];
      (*dx)[r * cols + i] = (dy[r * cols + i] * gamma[i] - xhat * mean) * rstd[r];
      (*dgamma)[i] += dy[r * cols + i] * xhat;
    }
  }
}

int DocumentSample(aclrtStream stream) {
  const std::vector<int64_t> shape = {2, 1, 16};
  const std::vector<float> gradInputHostData = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
  const std::vector<float> xInputHostData = gradInputHostData;  // the document gives both the same values
  const std::vector<float> rstdInputHostData = {1, 2};
  const std::vector<float> gammaInputHostData = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  SampleTensors tensors;
  aclTensor* dy = tensors.Create(gradInputHostData, shape, ACL_FLOAT);
  aclTensor* x = tensors.Create(xInputHostData, shape, ACL_FLOAT);
  aclTensor* rstd = tensors.Create(rstdInputHostData, {2}, ACL_FLOAT);
  aclTensor* gamma = tensors.Create(gammaInputHostData, {16}, ACL_FLOAT);
  aclTensor* dx = tensors.Zeros<float>(shape, ACL_FLOAT);
  aclTensor* dgamma = tensors.Zeros<float>({16}, ACL_FLOAT);
  CHECK_RET(dy && x && rstd && gamma && dx && dgamma, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret =
      aclnnRmsNormGradGetWorkspaceSize(dy, x, rstd, gamma, dx, dgamma, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnRmsNormGrad", ret, workspaceSize, executor, aclnnRmsNormGrad, stream) == 0,
            return 1);
  std::vector<float> dxResult, dgammaResult;
  CHECK_RET(tensors.Read(dx, &dxResult) == 0 && tensors.Read(dgamma, &dgammaResult) == 0, return 1);
  std::vector<double> dxWant, dgammaWant;
  RmsNormGradReference(AsDouble(gradInputHostData), AsDouble(xInputHostData), AsDouble(rstdInputHostData),
                       AsDouble(gammaInputHostData), &dxWant, &dgammaWant);
  // dx subtracts two terms of similar size: the tolerance scales with the largest of them
  return CheckClose("dx", dxResult, dxWant, 1e-6, 1e-6 * 32 * 16 * 32 * 4) +
         CheckClose("dgamma", dgammaResult, dgammaWant, 1e-6, 0.0);
}

}  // namespace

int main() { return RunSample("aclnnRmsNormGrad", DocumentSample); }
