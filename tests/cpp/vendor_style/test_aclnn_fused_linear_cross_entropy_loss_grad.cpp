/* CANN sample for aclnnFusedLinearCrossEntropyLossGrad (C++11, vendor headers only), single rank of a
 * vocabulary split in shards of 6, ids [6, 12): bfloat16 input (BT=5, H=8) and weight (6, 8) held as
 * op::bfloat16, float32 grad, the bit-packed targetMask and maskedTarget of aclnnFusedLinearOnlineMaxSum.
 * Runs both modes: memory-saving (logitsMax and sumExpLogits given, softmax recomputed) and
 * high-performance (softmax given). Checks inputGradOut and weightGradOut against float64 computed here:
 *   G_ij = (softmax_ij - [j == maskedTarget_i and row i in the shard]) * grad_i, rounded to bfloat16,
 *   inputGrad = G @ weight (BT, H), weightGrad = G^T @ input (V, H). */
#include <cmath>
#include <vector>

#include "aclnn/opdev/bfloat16.h"
#include "aclnn_fused_linear_cross_entropy_loss_grad.h"
#include "sample_common.h"
#include "vocab_parallel_reference.h"

namespace {

const int64_t BT = 5, H = 8, V = 6, kVocabStart = 6;

struct Gradients {
  std::vector<double> input, weight;
};

Gradients LinearCrossEntropyGradReference(const std::vector<double>& softmax, const ShardStatistics& shard,
                                          const std::vector<double>& grad, const std::vector<double>& input,
                                          const std::vector<double>& weight) {
  std::vector<double> g(BT * V);
  for (int64_t i = 0; i < BT; ++i) {
    const bool inShard = ((shard.targetMask[i / 8] >> (i % 8)) & 1) == 0;
    for (int64_t j = 0; j < V; ++j) {
      const double onehot = inShard && j == shard.maskedTarget[i] ? 1.0 : 0.0;
      g[i * V + j] = static_cast<float>(op::bfloat16(static_cast<float>((softmax[i * V + j] - onehot) * grad[i])));
    }
  }
  Gradients out;
  out.input.assign(BT * H, 0.0);
  out.weight.assign(V * H, 0.0);
  for (int64_t i = 0; i < BT; ++i)
    for (int64_t j = 0; j < V; ++j)
      for (int64_t k = 0; k < H; ++k) {
        out.input[i * H + k] += g[i * V + j] * weight[j * H + k];
        out.weight[j * H + k] += g[i * V + j] * input[i * H + k];
      }
  return out;
}

// One launch; highPerformance: softmax given (logitsMax, sumExpLogits unused), else recomputed from them.
int RunMode(aclrtStream stream, bool highPerformance) {
  const std::vector<op::bfloat16> input = StoredAs<op::bfloat16>(Wave(BT * H, 1.0, 0.1));
  const std::vector<op::bfloat16> weight = StoredAs<op::bfloat16>(Wave(V * H, 0.8, 2.3));
  const std::vector<float> grad = StoredAs<float>(Wave(BT, 0.5, 1.0, 1.0));
  const std::vector<double> logits = ShardLogits(AsDouble(input), AsDouble(weight), BT, H, V);
  const ShardStatistics shard = ShardReference(logits, {7, 2, 11, 6, 13}, BT, V, kVocabStart);
  const std::vector<float> logitsMax = StoredAs<float>(shard.max), sumExp = StoredAs<float>(shard.sumExp);
  std::vector<double> softmaxExact(BT * V);
  for (int64_t i = 0; i < BT; ++i)
    for (int64_t j = 0; j < V; ++j) softmaxExact[i * V + j] = std::exp(logits[i * V + j] - shard.max[i]) / shard.sumExp[i];
  const std::vector<float> softmax = StoredAs<float>(softmaxExact);

  SampleTensors tensors;
  aclTensor* gradTensor = tensors.Create(grad, {BT}, ACL_FLOAT);
  aclTensor* inputTensor = tensors.Create(input, {BT, H}, ACL_BF16);
  aclTensor* weightTensor = tensors.Create(weight, {V, H}, ACL_BF16);
  aclTensor* targetMask = tensors.Create(shard.targetMask, {(BT + 7) / 8}, ACL_UINT8);
  aclTensor* maskedTarget = tensors.Create(shard.maskedTarget, {BT}, ACL_INT64);
  aclTensor* logitsMaxTensor = highPerformance ? nullptr : tensors.Create(logitsMax, {BT}, ACL_FLOAT);
  aclTensor* sumExpTensor = highPerformance ? nullptr : tensors.Create(sumExp, {BT}, ACL_FLOAT);
  aclTensor* softmaxTensor = highPerformance ? tensors.Create(softmax, {BT, V}, ACL_FLOAT) : nullptr;
  aclTensor* inputGradOut = tensors.Zeros<op::bfloat16>({BT, H}, ACL_BF16);
  aclTensor* weightGradOut = tensors.Zeros<op::bfloat16>({V, H}, ACL_BF16);
  CHECK_RET(gradTensor && inputTensor && weightTensor && targetMask && maskedTarget && inputGradOut && weightGradOut &&
                (highPerformance ? softmaxTensor != nullptr : logitsMaxTensor && sumExpTensor),
            return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(
      gradTensor, inputTensor, weightTensor, targetMask, maskedTarget, 0.0f, logitsMaxTensor, sumExpTensor,
      softmaxTensor, inputGradOut, weightGradOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnFusedLinearCrossEntropyLossGrad", ret, workspaceSize, executor,
                          aclnnFusedLinearCrossEntropyLossGrad, stream) == 0,
            return 1);

  std::vector<op::bfloat16> inputGrad, weightGrad;
  CHECK_RET(tensors.Read(inputGradOut, &inputGrad) == 0 && tensors.Read(weightGradOut, &weightGrad) == 0, return 1);
  const Gradients want =
      LinearCrossEntropyGradReference(AsDouble(softmax), shard, AsDouble(grad), AsDouble(input), AsDouble(weight));
  // bfloat16 results rounded once (2^-9 relative) after float32 sums of a few bfloat16 products.
  LOG_PRINT("%s mode\n", highPerformance ? "high-performance" : "memory-saving");
  return CheckClose("inputGradOut", inputGrad, want.input, 1.0 / 256, MaxAbs(want.input) / 256) +
         CheckClose("weightGradOut", weightGrad, want.weight, 1.0 / 256, MaxAbs(want.weight) / 256);
}

int FusedLinearCrossEntropyLossGradSample(aclrtStream stream) { return RunMode(stream, false) + RunMode(stream, true); }

}  // namespace

int main() { return RunSample("aclnnFusedLinearCrossEntropyLossGrad", FusedLinearCrossEntropyLossGradSample); }
