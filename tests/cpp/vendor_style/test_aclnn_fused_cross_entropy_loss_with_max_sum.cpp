/* CANN sample for aclnnFusedCrossEntropyLossWithMaxSum (C++11, vendor headers only): the statistics of a
 * single rank (nothing to all-reduce) of float32 logits (BT=4, V=6): logitsMax, sumExpLogits and
 * predictedLogits as aclnnFusedLinearOnlineMaxSum gives them (row 2's target is on another rank: 0),
 * and the logits themselves so that softMaxOutOptional is written. Checks against float64 computed here:
 *   loss_i = log(sumExp_i) - predicted_i,  softmax_ij = exp(L_ij - max_i) / sumExp_i. */
#include <cmath>
#include <vector>

#include "aclnn_fused_cross_entropy_loss_with_max_sum.h"
#include "sample_common.h"
#include "vocab_parallel_reference.h"

namespace {

const int64_t BT = 4, V = 6;

int FusedCrossEntropyLossWithMaxSumSample(aclrtStream stream) {
  const std::vector<float> logits = StoredAs<float>(Wave(BT * V, 2.0, 0.6));
  const ShardStatistics statistics = ShardReference(AsDouble(logits), {1, 5, 9, 0}, BT, V, 0);
  const std::vector<float> logitsMax = StoredAs<float>(statistics.max);
  const std::vector<float> sumExp = StoredAs<float>(statistics.sumExp);
  const std::vector<float> predicted = StoredAs<float>(statistics.predicted);
  SampleTensors tensors;
  aclTensor* logitsMaxTensor = tensors.Create(logitsMax, {BT}, ACL_FLOAT);
  aclTensor* sumExpTensor = tensors.Create(sumExp, {BT}, ACL_FLOAT);
  aclTensor* predictedTensor = tensors.Create(predicted, {BT}, ACL_FLOAT);
  aclTensor* logitsTensor = tensors.Create(logits, {BT, V}, ACL_FLOAT);
  aclTensor* lossOut = tensors.Zeros<float>({BT}, ACL_FLOAT);
  aclTensor* softmaxOut = tensors.Zeros<float>({BT, V}, ACL_FLOAT);
  CHECK_RET(logitsMaxTensor && sumExpTensor && predictedTensor && logitsTensor && lossOut && softmaxOut, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const float labelSmoothing = 0.0f;
  const aclnnStatus ret = aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize(
      logitsMaxTensor, sumExpTensor, predictedTensor, labelSmoothing, nullptr, nullptr, logitsTensor, lossOut,
      softmaxOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnFusedCrossEntropyLossWithMaxSum", ret, workspaceSize, executor,
                          aclnnFusedCrossEntropyLossWithMaxSum, stream) == 0,
            return 1);

  std::vector<float> loss, softmax;
  CHECK_RET(tensors.Read(lossOut, &loss) == 0 && tensors.Read(softmaxOut, &softmax) == 0, return 1);
  const std::vector<double> max = AsDouble(logitsMax), sum = AsDouble(sumExp), pred = AsDouble(predicted);
  const std::vector<double> x = AsDouble(logits);
  std::vector<double> wantLoss(BT), wantSoftmax(BT * V);
  for (int64_t i = 0; i < BT; ++i) {
    wantLoss[i] = std::log(sum[i]) - pred[i];
    for (int64_t j = 0; j < V; ++j) wantSoftmax[i * V + j] = std::exp(x[i * V + j] - max[i]) / sum[i];
  }
  return CheckClose("lossOut", loss, wantLoss, 1e-6, 1e-6) + CheckClose("softMaxOutOptional", softmax, wantSoftmax, 1e-6, 1e-7);
}

}  // namespace

int main() { return RunSample("aclnnFusedCrossEntropyLossWithMaxSum", FusedCrossEntropyLossWithMaxSumSample); }
