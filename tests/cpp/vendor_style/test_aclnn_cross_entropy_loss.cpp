/* CANN sample for aclnnCrossEntropyLoss (C++11, vendor headers only): float32 logits (N=4, C=5), class
 * weights, one ignored row (ignoreIndex -100), label smoothing 0.1, z-loss 0.01, reduction "mean".
 * Checks loss, logProb, zloss and lseForZloss against float64 computed here:
 *   lse_i = log sum_c exp(x_ic), logProb = x - lse, m_i = (t_i != ignoreIndex),
 *   ce_i = m_i [(1-ls)(-w[t_i] logProb[i,t_i]) + (ls/C)(-sum_c w_c logProb_ic)], z_i = m_i z lse_i^2,
 *   loss = sum ce / sum_i m_i w[t_i] + sum z / sum m, zloss = sum z / sum m. */
#include <cmath>
#include <vector>

#include "aclnn_cross_entropy_loss.h"
#include "sample_common.h"

namespace {

const int64_t N = 4, C = 5, kIgnoreIndex = -100;
const double kLabelSmoothing = 0.1, kZloss = 0.01;

struct Reference {
  std::vector<double> loss, logProb, zloss, lse;
};

Reference CrossEntropyReference(const std::vector<double>& x, const std::vector<int64_t>& target,
                                const std::vector<double>& w) {
  Reference r;
  r.logProb.resize(N * C);
  r.lse.resize(N);
  double ce = 0, z = 0, weightSum = 0, kept = 0;
  for (int64_t i = 0; i < N; ++i) {
    double sumExp = 0;
    for (int64_t c = 0; c < C; ++c) sumExp += std::exp(x[i * C + c]);
    r.lse[i] = std::log(sumExp);
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) {
      r.logProb[i * C + c] = x[i * C + c] - r.lse[i];
      smooth -= w[c] * r.logProb[i * C + c];
    }
    if (target[i] == kIgnoreIndex) continue;
    const double nll = -w[target[i]] * r.logProb[i * C + target[i]];
    ce += (1 - kLabelSmoothing) * nll + kLabelSmoothing / C * smooth;
    z += kZloss * r.lse[i] * r.lse[i];
    weightSum += w[target[i]];
    kept += 1;
  }
  r.loss.assign(1, ce / weightSum + z / kept);
  r.zloss.assign(1, z / kept);
  return r;
}

int CrossEntropyLossSample(aclrtStream stream) {
  const std::vector<float> x = StoredAs<float>(Wave(N * C, 3.0, 0.2));
  const std::vector<int64_t> target = {2, 0, kIgnoreIndex, 4};
  const std::vector<float> weight = {1.0f, 0.5f, 2.0f, 1.0f, 0.25f};
  SampleTensors tensors;
  aclTensor* input = tensors.Create(x, {N, C}, ACL_FLOAT);
  aclTensor* targetTensor = tensors.Create(target, {N}, ACL_INT64);
  aclTensor* weightTensor = tensors.Create(weight, {C}, ACL_FLOAT);
  aclTensor* lossOut = tensors.Zeros<float>({}, ACL_FLOAT);  // 0-d for "mean"
  aclTensor* logProbOut = tensors.Zeros<float>({N, C}, ACL_FLOAT);
  aclTensor* zlossOut = tensors.Zeros<float>({}, ACL_FLOAT);
  aclTensor* lseForZlossOut = tensors.Zeros<float>({N}, ACL_FLOAT);
  CHECK_RET(input && targetTensor && weightTensor && lossOut && logProbOut && zlossOut && lseForZlossOut, return 1);

  char reduction[] = "mean";
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnCrossEntropyLossGetWorkspaceSize(
      input, targetTensor, weightTensor, reduction, kIgnoreIndex, kLabelSmoothing, kZloss, true, lossOut, logProbOut,
      zlossOut, lseForZlossOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnCrossEntropyLoss", ret, workspaceSize, executor, aclnnCrossEntropyLoss, stream) == 0,
            return 1);

  std::vector<float> loss, logProb, zloss, lse;
  CHECK_RET(tensors.Read(lossOut, &loss) == 0 && tensors.Read(logProbOut, &logProb) == 0 &&
                tensors.Read(zlossOut, &zloss) == 0 && tensors.Read(lseForZlossOut, &lse) == 0,
            return 1);
  const Reference want = CrossEntropyReference(AsDouble(x), target, AsDouble(weight));
  return CheckClose("loss", loss, want.loss, 1e-5, 1e-6) + CheckClose("logProb", logProb, want.logProb, 1e-5, 1e-6) +
         CheckClose("zloss", zloss, want.zloss, 1e-5, 1e-6) + CheckClose("lseForZloss", lse, want.lse, 1e-5, 1e-6);
}

}  // namespace

int main() { return RunSample("aclnnCrossEntropyLoss", CrossEntropyLossSample); }
