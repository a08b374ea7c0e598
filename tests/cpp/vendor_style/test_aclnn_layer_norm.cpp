/* CANN sample for aclnnLayerNorm (C++11, vendor headers only): input (2, 3, 5) float32 normalised over
 * normalizedShape (3, 5) with float32 weight and bias (3, 5), and meanOut / rstdOut (2, 1, 1). Checked
 * against float64 computed here from the document's formula over each row of 15 elements:
 *   mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + eps), out = (x - mean) * rstd * weight + bias. */
#include <cmath>
#include <vector>

#include "aclnn_layer_norm.h"
#include "sample_common.h"

namespace {

void LayerNormReference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                        double eps, std::vector<double>* out, std::vector<double>* mean, std::vector<double>* rstd) {
  const size_t cols = w.size(), rows = x.size() / cols;
  out->assign(x.size(), 0.0);
  mean->assign(rows, 0.0);
  rstd->assign(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double m = 0.0, v = 0.0;
    for (size_t i = 0; i < cols; ++i) m += x[r * cols + i];
    m /= static_cast<double>(cols);
    for (size_t i = 0; i < cols; ++i) v += (x[r * cols + i] - m) * (x[r * cols + i] - m);
    const double s = 1.0 / std::sqrt(v / static_cast<double>(cols) + eps);
    for (size_t i = 0; i < cols; ++i) (*out)[r * cols + i] = (x[r * cols + i] - m) * s * w[i] + b[i];
    (*mean)[r] = m;
    (*rstd)[r] = s;
  }
}

int LayerNormSample(aclrtStream stream) {
  const std::vector<int64_t> shape = {2, 3, 5}, normShape = {3, 5}, statShape = {2, 1, 1};
  const double eps = 1e-5;
  const std::vector<float> xHost = StoredAs<float>(Wave(30, 2.0, 0.3, 0.5));
  const std::vector<float> wHost = StoredAs<float>(Wave(15, 0.5, 1.1, 1.0));
  const std::vector<float> bHost = StoredAs<float>(Wave(15, 0.25, 2.0));
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHost, shape, ACL_FLOAT);
  aclTensor* w = tensors.Create(wHost, normShape, ACL_FLOAT);
  aclTensor* b = tensors.Create(bHost, normShape, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>(shape, ACL_FLOAT);
  aclTensor* mean = tensors.Zeros<float>(statShape, ACL_FLOAT);
  aclTensor* rstd = tensors.Zeros<float>(statShape, ACL_FLOAT);
  aclIntArray* normalizedShape = aclCreateIntArray(normShape.data(), normShape.size());
  CHECK_RET(x && w && b && out && mean && rstd && normalizedShape, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret =
      aclnnLayerNormGetWorkspaceSize(x, normalizedShape, w, b, eps, out, mean, rstd, &workspaceSize, &executor);
  aclDestroyIntArray(normalizedShape);
  CHECK_RET(LaunchAndWait("aclnnLayerNorm", ret, workspaceSize, executor, aclnnLayerNorm, stream) == 0, return 1);
  std::vector<float> outResult, meanResult, rstdResult;
  CHECK_RET(tensors.Read(out, &outResult) == 0 && tensors.Read(mean, &meanResult) == 0 &&
                tensors.Read(rstd, &rstdResult) == 0,
            return 1);
  std::vector<double> outWant, meanWant, rstdWant;
  LayerNormReference(AsDouble(xHost), AsDouble(wHost), AsDouble(bHost), eps, &outWant, &meanWant, &rstdWant);
  return CheckClose("out", outResult, outWant, 1e-5, 1e-5) + CheckClose("mean", meanResult, meanWant, 1e-5, 1e-6) +
         CheckClose("rstd", rstdResult, rstdWant, 1e-5, 0.0);
}

}  // namespace

int main() { return RunSample("aclnnLayerNorm", LayerNormSample); }
