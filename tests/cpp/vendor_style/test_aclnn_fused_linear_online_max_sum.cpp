/* CANN sample for aclnnFusedLinearOnlineMaxSum (C++11, vendor headers only): one rank of a vocabulary split
 * in shards of 6 holds ids [6, 12); bfloat16 input (BT=5, H=8) and weight (6, 8) held as op::bfloat16,
 * int64 targets of which two lie outside the shard. Checks every output against float64 computed here
 * (vocab_parallel_reference.h): logitsMax, sumExpLogits, predictedLogits (float32), the bit-packed
 * targetMask and maskedTarget (exact), and the logits L = input @ weight^T (bfloat16). */
#include <vector>

#include "aclnn/opdev/bfloat16.h"
#include "aclnn_fused_linear_online_max_sum.h"
#include "sample_common.h"
#include "vocab_parallel_reference.h"

namespace {

const int64_t BT = 5, H = 8, V = 6, kVocabStart = 6;

int FusedLinearOnlineMaxSumSample(aclrtStream stream) {
  const std::vector<op::bfloat16> input = StoredAs<op::bfloat16>(Wave(BT * H, 1.0, 0.1));
  const std::vector<op::bfloat16> weight = StoredAs<op::bfloat16>(Wave(V * H, 0.8, 2.3));
  const std::vector<int64_t> target = {7, 2, 11, 6, 13};  // 2 and 13 belong to other ranks
  SampleTensors tensors;
  aclTensor* inputTensor = tensors.Create(input, {BT, H}, ACL_BF16);
  aclTensor* weightTensor = tensors.Create(weight, {V, H}, ACL_BF16);
  aclTensor* targetTensor = tensors.Create(target, {BT}, ACL_INT64);
  aclTensor* logitsMaxOut = tensors.Zeros<float>({BT}, ACL_FLOAT);
  aclTensor* sumExpLogitsOut = tensors.Zeros<float>({BT}, ACL_FLOAT);
  aclTensor* predictedLogitsOut = tensors.Zeros<float>({BT}, ACL_FLOAT);
  aclTensor* targetMaskOut = tensors.Zeros<uint8_t>({(BT + 7) / 8}, ACL_UINT8);
  aclTensor* maskedTargetOut = tensors.Zeros<int64_t>({BT}, ACL_INT64);
  aclTensor* logitsOut = tensors.Zeros<op::bfloat16>({BT, V}, ACL_BF16);
  CHECK_RET(inputTensor && weightTensor && targetTensor && logitsMaxOut && sumExpLogitsOut && predictedLogitsOut &&
                targetMaskOut && maskedTargetOut && logitsOut,
            return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
      inputTensor, weightTensor, targetTensor, kVocabStart, kVocabStart + V, logitsMaxOut, sumExpLogitsOut,
      predictedLogitsOut, targetMaskOut, maskedTargetOut, logitsOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnFusedLinearOnlineMaxSum", ret, workspaceSize, executor, aclnnFusedLinearOnlineMaxSum,
                          stream) == 0,
            return 1);

  std::vector<float> logitsMax, sumExp, predicted;
  std::vector<uint8_t> targetMask;
  std::vector<int64_t> maskedTarget;
  std::vector<op::bfloat16> logits;
  CHECK_RET(tensors.Read(logitsMaxOut, &logitsMax) == 0 && tensors.Read(sumExpLogitsOut, &sumExp) == 0 &&
                tensors.Read(predictedLogitsOut, &predicted) == 0 && tensors.Read(targetMaskOut, &targetMask) == 0 &&
                tensors.Read(maskedTargetOut, &maskedTarget) == 0 && tensors.Read(logitsOut, &logits) == 0,
            return 1);
  const std::vector<double> wantLogits = ShardLogits(AsDouble(input), AsDouble(weight), BT, H, V);
  const ShardStatistics want = ShardReference(wantLogits, target, BT, V, kVocabStart);
  // float32 results of a float32-accumulated product of 8 bfloat16 pairs; bfloat16 logits rounded once.
  return CheckClose("logitsMaxLocalOut", logitsMax, want.max, 1e-5, 1e-5) +
         CheckClose("sumExpLogitsLocalOut", sumExp, want.sumExp, 1e-5, 1e-5) +
         CheckClose("predictedLogitsLocalOut", predicted, want.predicted, 1e-5, 1e-5) +
         CheckClose("targetMaskOut", targetMask, AsDouble(want.targetMask), 0, 0) +
         CheckClose("maskedTargetOut", maskedTarget, AsDouble(want.maskedTarget), 0, 0) +
         CheckClose("vocabParallelLogitsOutOptional", logits, wantLogits, 1.0 / 256, 1e-5);
}

}  // namespace

int main() { return RunSample("aclnnFusedLinearOnlineMaxSum", FusedLinearOnlineMaxSumSample); }
