/* CANN sample for aclnnFusedLinearOnlineMaxSum (C++11, vendor headers only), checked against float64 computed
 * here (vocab_parallel_reference.h): logitsMax, sumExpLogits, predictedLogits (float32), the bit-packed
 * targetMask and maskedTarget (exact) and, when asked, the logits L = input @ weight^T (bfloat16).
 * bfloat16 input and weight held as op::bfloat16, int64 targets, some outside the shard.
 * 1. One rank of a vocabulary split in shards of 6 holds ids [6, 12): input (BT=5, H=8), weight (6, 8).
 * 2. vocabEndIndex - vocabStartIndex smaller than the weight's rows V, as the vendor's own document example
 *    and system tests call it (issue 25): logitsMax and sumExpLogits run over all V local columns, targets
 *    are masked against [start, end) (a target in [end, start + V) is masked although the weight has its
 *    row), and the padding bits of targetMask's last byte are those of a target 0 (1 where start > 0), as
 *    the vendor's golden gives them. Also end - start == V, an empty range, and the refusals: end - start
 *    > V (161002: the columns would not exist), end < start, start < 0. */
#include <cstring>
#include <vector>

#include "aclnn/opdev/bfloat16.h"
#include "aclnn_fused_linear_online_max_sum.h"
#include "sample_common.h"
#include "vocab_parallel_reference.h"

namespace {

const int64_t H = 8;

// One launch over [start, end) of a weight with v rows and bt targets; returns the failures.
int RunShard(aclrtStream stream, int64_t v, int64_t start, int64_t end, const std::vector<int64_t>& target,
             bool withLogits) {
  const int64_t bt = static_cast<int64_t>(target.size());
  LOG_PRINT("range [%lld, %lld), V = %lld, BT = %lld\n", static_cast<long long>(start), static_cast<long long>(end),
            static_cast<long long>(v), static_cast<long long>(bt));
  const std::vector<op::bfloat16> input = StoredAs<op::bfloat16>(Wave(bt * H, 1.0, 0.1));
  const std::vector<op::bfloat16> weight = StoredAs<op::bfloat16>(Wave(v * H, 0.8, 2.3));
  SampleTensors tensors;
  aclTensor* inputTensor = tensors.Create(input, {bt, H}, ACL_BF16);
  aclTensor* weightTensor = tensors.Create(weight, {v, H}, ACL_BF16);
  aclTensor* targetTensor = tensors.Create(target, {bt}, ACL_INT64);
  aclTensor* logitsMaxOut = tensors.Zeros<float>({bt}, ACL_FLOAT);
  aclTensor* sumExpLogitsOut = tensors.Zeros<float>({bt}, ACL_FLOAT);
  aclTensor* predictedLogitsOut = tensors.Zeros<float>({bt}, ACL_FLOAT);
  aclTensor* targetMaskOut = tensors.Zeros<uint8_t>({(bt + 7) / 8}, ACL_UINT8);
  aclTensor* maskedTargetOut = tensors.Zeros<int64_t>({bt}, ACL_INT64);
  aclTensor* logitsOut = withLogits ? tensors.Zeros<op::bfloat16>({bt, v}, ACL_BF16) : nullptr;
  CHECK_RET(inputTensor && weightTensor && targetTensor && logitsMaxOut && sumExpLogitsOut && predictedLogitsOut &&
                targetMaskOut && maskedTargetOut && (logitsOut || !withLogits),
            return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
      inputTensor, weightTensor, targetTensor, start, end, logitsMaxOut, sumExpLogitsOut, predictedLogitsOut,
      targetMaskOut, maskedTargetOut, logitsOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnFusedLinearOnlineMaxSum", ret, workspaceSize, executor, aclnnFusedLinearOnlineMaxSum,
                          stream) == 0,
            return 1);

  std::vector<float> logitsMax, sumExp, predicted;
  std::vector<uint8_t> targetMask;
  std::vector<int64_t> maskedTarget;
  std::vector<op::bfloat16> logits;
  CHECK_RET(tensors.Read(logitsMaxOut, &logitsMax) == 0 && tensors.Read(sumExpLogitsOut, &sumExp) == 0 &&
                tensors.Read(predictedLogitsOut, &predicted) == 0 && tensors.Read(targetMaskOut, &targetMask) == 0 &&
                tensors.Read(maskedTargetOut, &maskedTarget) == 0 &&
                (!withLogits || tensors.Read(logitsOut, &logits) == 0),
            return 1);
  const std::vector<double> wantLogits = ShardLogits(AsDouble(input), AsDouble(weight), bt, H, v);
  const ShardStatistics want = ShardReference(wantLogits, target, bt, v, start, end);
  // float32 results of a float32-accumulated product of 8 bfloat16 pairs; bfloat16 logits rounded once.
  return CheckClose("logitsMaxLocalOut", logitsMax, want.max, 1e-5, 1e-5) +
         CheckClose("sumExpLogitsLocalOut", sumExp, want.sumExp, 1e-5, 1e-5) +
         CheckClose("predictedLogitsLocalOut", predicted, want.predicted, 1e-5, 1e-5) +
         CheckClose("targetMaskOut", targetMask, AsDouble(want.targetMask), 0, 0) +
         CheckClose("maskedTargetOut", maskedTarget, AsDouble(want.maskedTarget), 0, 0) +
         (withLogits ? CheckClose("vocabParallelLogitsOutOptional", logits, wantLogits, 1.0 / 256, 1e-5) : 0);
}

// GetWorkspaceSize over [start, end) must return 161002 with `text` in the message.
int ExpectRefused(int64_t start, int64_t end, const char* text) {
  const int64_t BT = 9, V = 8;
  SampleTensors tensors;
  aclTensor* inputTensor = tensors.Zeros<op::bfloat16>({BT, H}, ACL_BF16);
  aclTensor* weightTensor = tensors.Zeros<op::bfloat16>({V, H}, ACL_BF16);
  aclTensor* targetTensor = tensors.Zeros<int64_t>({BT}, ACL_INT64);
  aclTensor* outs[3] = {tensors.Zeros<float>({BT}, ACL_FLOAT), tensors.Zeros<float>({BT}, ACL_FLOAT),
                        tensors.Zeros<float>({BT}, ACL_FLOAT)};
  aclTensor* targetMaskOut = tensors.Zeros<uint8_t>({(BT + 7) / 8}, ACL_UINT8);
  aclTensor* maskedTargetOut = tensors.Zeros<int64_t>({BT}, ACL_INT64);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
      inputTensor, weightTensor, targetTensor, start, end, outs[0], outs[1], outs[2], targetMaskOut, maskedTargetOut,
      nullptr, &workspaceSize, &executor);
  const char* message = RecentErrMsg();
  LOG_PRINT("range [%lld, %lld): status %d, %s\n", static_cast<long long>(start), static_cast<long long>(end), ret,
            message);
  CHECK_RET(ret == ACLNN_ERR_PARAM_INVALID && std::strstr(message, text) != nullptr,
            LOG_PRINT("FAIL: expected 161002 with \"%s\"\n", text);
            return 1);
  return 0;
}

int FusedLinearOnlineMaxSumSample(aclrtStream stream) {
  // 2 and 13 belong to other ranks.
  int failures = RunShard(stream, 6, 6, 12, {7, 2, 11, 6, 13}, true);
  // V = 8 rows, ids 16..20 this rank's: 21 and 23 have weight rows (16 + 5, 16 + 7) but lie past end.
  failures += RunShard(stream, 8, 16, 21, {16, 20, 21, 3, 18, 23, 40, 17, 19}, true) +
              RunShard(stream, 8, 0, 3, {0, 1, 2, 3, 7, 2, 9, 1, 0}, false) +        // start 0: padding bits 0
              RunShard(stream, 8, 8, 8, {8, 0, 9, 7, 8, 15, 16, 1, 2}, false) +      // empty range: all masked
              RunShard(stream, 8, 24, 32, {24, 31, 32, 23, 25, 30, 0, 26, 27}, false);  // end - start == V
  return failures + ExpectRefused(16, 25, "vocabEndIndex - vocabStartIndex must be <= weight rows 8, got 9") +
         ExpectRefused(5, 4, "vocabEndIndex must be >= vocabStartIndex 5, got 4") +
         ExpectRefused(-1, 4, "vocabStartIndex must be >= 0, got -1");
}

}  // namespace

int main() { return RunSample("aclnnFusedLinearOnlineMaxSum", FusedLinearOnlineMaxSumSample); }
