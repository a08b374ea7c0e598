/* CANN sample for aclnnRotaryPositionEmbeddingGrad (C++11, vendor headers only): dy and x of shape
 * (B, S, N, D) = (2, 4, 3, 8) float32, cos / sin (1, S, 1, D) broadcast over the batch and the heads,
 * mode 1 (interleave). Checks dxOut, dcosOut and dsinOut against float64 computed here from the document's
 * formulas (dy1, dy2 = dy[..., ::2], dy[..., 1::2], likewise cos, sin, x):
 *   dx   = stack(cos1 dy1 + sin2 dy2, cos2 dy2 - sin1 dy1)
 *   dcos = sum over B and N of dy * x,   dsin = sum over B and N of dy * stack(-x2, x1).
 * Then the same call with xOptional null: dxOut again, dcosOut / dsinOut left as they were. */
#include <vector>

#include "aclnn_rotary_position_embedding_grad.h"
#include "sample_common.h"

namespace {

const int64_t kB = 2, kS = 4, kN = 3, kD = 8;

struct GradReference {
  std::vector<double> dx, dcos, dsin;
};

GradReference Reference(const std::vector<double>& dy, const std::vector<double>& cos, const std::vector<double>& sin,
                        const std::vector<double>& x) {
  GradReference r;
  r.dx.assign(dy.size(), 0.0);
  r.dcos.assign(cos.size(), 0.0);
  r.dsin.assign(cos.size(), 0.0);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t s = 0; s < kS; ++s)
      for (int64_t n = 0; n < kN; ++n) {
        const int64_t row = ((b * kS + s) * kN + n) * kD, crow = s * kD;
        for (int64_t i = 0; i < kD; i += 2) {
          const double g1 = dy[row + i], g2 = dy[row + i + 1], x1 = x[row + i], x2 = x[row + i + 1];
          const double c1 = cos[crow + i], c2 = cos[crow + i + 1], s1 = sin[crow + i], s2 = sin[crow + i + 1];
          r.dx[row + i] = c1 * g1 + s2 * g2;
          r.dx[row + i + 1] = c2 * g2 - s1 * g1;
          r.dcos[crow + i] += g1 * x1;
          r.dcos[crow + i + 1] += g2 * x2;
          r.dsin[crow + i] += g1 * -x2;
          r.dsin[crow + i + 1] += g2 * x1;
        }
      }
  return r;
}

int RopeGradSample(aclrtStream stream) {
  const std::vector<int64_t> shape = {kB, kS, kN, kD}, cosShape = {1, kS, 1, kD};
  const int64_t mode = 1;
  const std::vector<float> dyHost = StoredAs<float>(Wave(static_cast<size_t>(kB * kS * kN * kD), 1.5, 0.2));
  const std::vector<float> xHost = StoredAs<float>(Wave(dyHost.size(), 3.0, 1.1));
  const std::vector<float> cosHost = StoredAs<float>(Wave(static_cast<size_t>(kS * kD), 1.0, 0.5));
  const std::vector<float> sinHost = StoredAs<float>(Wave(cosHost.size(), 1.0, 2.0));
  SampleTensors tensors;
  aclTensor* dy = tensors.Create(dyHost, shape, ACL_FLOAT);
  aclTensor* cos = tensors.Create(cosHost, cosShape, ACL_FLOAT);
  aclTensor* sin = tensors.Create(sinHost, cosShape, ACL_FLOAT);
  aclTensor* x = tensors.Create(xHost, shape, ACL_FLOAT);
  aclTensor* dx = tensors.Zeros<float>(shape, ACL_FLOAT);
  aclTensor* dcos = tensors.Zeros<float>(cosShape, ACL_FLOAT);
  aclTensor* dsin = tensors.Zeros<float>(cosShape, ACL_FLOAT);
  CHECK_RET(dy && cos && sin && x && dx && dcos && dsin, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  aclnnStatus ret = aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(dy, cos, sin, x, mode, dx, dcos, dsin,
                                                                     &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnRotaryPositionEmbeddingGrad", ret, workspaceSize, executor,
                          aclnnRotaryPositionEmbeddingGrad, stream) == 0,
            return 1);
  std::vector<float> dxResult, dcosResult, dsinResult;
  CHECK_RET(tensors.Read(dx, &dxResult) == 0 && tensors.Read(dcos, &dcosResult) == 0 &&
                tensors.Read(dsin, &dsinResult) == 0,
            return 1);
  const GradReference want = Reference(AsDouble(dyHost), AsDouble(cosHost), AsDouble(sinHost), AsDouble(xHost));
  int failures = CheckClose("dx", dxResult, want.dx, 1e-6, 1e-6) + CheckClose("dcos", dcosResult, want.dcos, 1e-5, 1e-5) +
                 CheckClose("dsin", dsinResult, want.dsin, 1e-5, 1e-5);

  // xOptional null: dx only; dcosOut and dsinOut must still be given, and keep the values above.
  aclTensor* dx2 = tensors.Zeros<float>(shape, ACL_FLOAT);
  CHECK_RET(dx2 != nullptr, return 1);
  ret = aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(dy, cos, sin, nullptr, mode, dx2, dcos, dsin, &workspaceSize,
                                                         &executor);
  CHECK_RET(LaunchAndWait("aclnnRotaryPositionEmbeddingGrad", ret, workspaceSize, executor,
                          aclnnRotaryPositionEmbeddingGrad, stream) == 0,
            return 1);
  std::vector<float> dx2Result, dcosAgain;
  CHECK_RET(tensors.Read(dx2, &dx2Result) == 0 && tensors.Read(dcos, &dcosAgain) == 0, return 1);
  failures += CheckClose("dx without xOptional", dx2Result, want.dx, 1e-6, 1e-6);
  failures += CheckClose("dcos untouched", dcosAgain, AsDouble(dcosResult), 0.0, 0.0);
  return failures;
}

}  // namespace

int main() { return RunSample("aclnnRotaryPositionEmbeddingGrad", RopeGradSample); }
