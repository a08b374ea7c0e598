/* CANN sample for aclnnLayerNormBackward (C++11, vendor headers only): gradOut and input (4, 6) float32,
 * normalizedShape (6), mean and rstd (4, 1) float32 as the forward gives them (computed here), weight
 * and bias (6), outputMask {true, true, true}. Checked against float64 from the document's formulas:
 *   xhat = (x - mean) * rstd, g = dy * w,
 *   dx = rstd * (g - mean_N(g) - xhat * mean_N(g * xhat)), dw = sum over rows of dy * xhat,
 *   db = sum over rows of dy. */
#include <cmath>
#include <vector>

#include "aclnn_layer_norm_backward.h"
#include "sample_common.h"

namespace {

const size_t kRows = 4, kCols = 6;

void Stats(const std::vector<double>& x, std::vector<double>* mean, std::vector<double>* rstd) {
  mean->assign(kRows, 0.0);
  rstd->assign(kRows, 0.0);
  for (size_t r = 0; r < kRows; ++r) {
    double m = 0.0, v = 0.0;
    for (size_t i = 0; i < kCols; ++i) m += x[r * kCols + i];
    m /= kCols;
    for (size_t i = 0; i < kCols; ++i) v += (x[r * kCols + i] - m) * (x[r * kCols + i] - m);
    (*mean)[r] = m;
    (*rstd)[r] = 1.0 / std::sqrt(v / kCols + 1e-5);
  }
}

void BackwardReference(const std::vector<double>& dy, const std::vector<double>& x, const std::vector<double>& mean,
                       const std::vector<double>& rstd, const std::vector<double>& w, std::vector<double>* dx,
                       std::vector<double>* dw, std::vector<double>* db) {
  dx->assign(x.size(), 0.0);
  dw->assign(kCols, 0.0);
  db->assign(kCols, 0.0);
  for (size_t r = 0; r < kRows; ++r) {
    double a = 0.0, c = 0.0;
    for (size_t i = 0; i < kCols; ++i) {
      const double xhat = (x[r * kCols + i] - mean[r]) * rstd[r], g = dy[r * kCols + i] * w[i];
      a += g;
      c += g * xhat;
      (*dw)[i] += dy[r * kCols + i] * xhat;
      (*db)[i] += dy[r * kCols + i];
    }
    for (size_t i = 0; i < kCols; ++i) {
      const double xhat = (x[r * kCols + i] - mean[r]) * rstd[r], g = dy[r * kCols + i] * w[i];
      (*dx)[r * kCols + i] = rstd[r] * (g - a / kCols - xhat * c / kCols);
    }
  }
}

int LayerNormBackwardSample(aclrtStream stream) {
  const std::vector<int64_t> shape = {4, 6}, normShape = {6}, statShape = {4, 1};
  const std::vector<float> dyHost = StoredAs<float>(Wave(24, 1.0, 0.9));
  const std::vector<float> xHost = StoredAs<float>(Wave(24, 2.0, 0.2, 0.3));
  const std::vector<float> wHost = StoredAs<float>(Wave(6, 0.5, 1.3, 1.0));
  const std::vector<float> bHost = StoredAs<float>(Wave(6, 0.1, 0.4));
  std::vector<double> meanD, rstdD;
  Stats(AsDouble(xHost), &meanD, &rstdD);
  const std::vector<float> meanHost = StoredAs<float>(meanD), rstdHost = StoredAs<float>(rstdD);
  SampleTensors tensors;
  aclTensor* dy = tensors.Create(dyHost, shape, ACL_FLOAT);
  aclTensor* x = tensors.Create(xHost, shape, ACL_FLOAT);
  aclTensor* mean = tensors.Create(meanHost, statShape, ACL_FLOAT);
  aclTensor* rstd = tensors.Create(rstdHost, statShape, ACL_FLOAT);
  aclTensor* w = tensors.Create(wHost, normShape, ACL_FLOAT);
  aclTensor* b = tensors.Create(bHost, normShape, ACL_FLOAT);
  aclTensor* dx = tensors.Zeros<float>(shape, ACL_FLOAT);
  aclTensor* dw = tensors.Zeros<float>(normShape, ACL_FLOAT);
  aclTensor* db = tensors.Zeros<float>(normShape, ACL_FLOAT);
  aclIntArray* normalizedShape = aclCreateIntArray(normShape.data(), normShape.size());
  const bool maskValues[3] = {true, true, true};
  aclBoolArray* outputMask = aclCreateBoolArray(maskValues, 3);
  CHECK_RET(dy && x && mean && rstd && w && b && dx && dw && db && normalizedShape && outputMask, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnLayerNormBackwardGetWorkspaceSize(dy, x, normalizedShape, mean, rstd, w, b, outputMask,
                                                                 dx, dw, db, &workspaceSize, &executor);
  aclDestroyIntArray(normalizedShape);
  aclDestroyBoolArray(outputMask);
  CHECK_RET(LaunchAndWait("aclnnLayerNormBackward", ret, workspaceSize, executor, aclnnLayerNormBackward, stream) == 0,
            return 1);
  std::vector<float> dxResult, dwResult, dbResult;
  CHECK_RET(tensors.Read(dx, &dxResult) == 0 && tensors.Read(dw, &dwResult) == 0 && tensors.Read(db, &dbResult) == 0,
            return 1);
  std::vector<double> dxWant, dwWant, dbWant;
  BackwardReference(AsDouble(dyHost), AsDouble(xHost), AsDouble(meanHost), AsDouble(rstdHost), AsDouble(wHost),
                    &dxWant, &dwWant, &dbWant);
  return CheckClose("gradInput", dxResult, dxWant, 1e-5, 1e-5) + CheckClose("gradWeight", dwResult, dwWant, 1e-5, 1e-5) +
         CheckClose("gradBias", dbResult, dbWant, 1e-5, 1e-6);
}

}  // namespace

int main() { return RunSample("aclnnLayerNormBackward", LayerNormBackwardSample); }
