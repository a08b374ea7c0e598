/* Float64 reference of the vocabulary-parallel cross entropy on one rank (specification section 5), shared by
 * the samples of aclnnFusedLinearOnlineMaxSum, aclnnFusedCrossEntropyLossWithMaxSum and
 * aclnnFusedLinearCrossEntropyLossGrad. The rank holds vocabulary ids [start, end), end - start <= V, as
 * the rows of weight (V, H); input (BT, H), logits L = input @ weight^T (BT, V), target (BT) global ids.
 * max and sumExp run over all V columns; targets are masked against [start, end). */
#ifndef TILEGRAD_TESTS_CPP_VENDOR_STYLE_VOCAB_PARALLEL_REFERENCE_H_
#define TILEGRAD_TESTS_CPP_VENDOR_STYLE_VOCAB_PARALLEL_REFERENCE_H_

#include <cmath>
#include <cstdint>
#include <vector>

// L = input @ weight^T, row-major (BT, V).
inline std::vector<double> ShardLogits(const std::vector<double>& input, const std::vector<double>& weight,
                                       int64_t bt, int64_t h, int64_t v) {
  std::vector<double> logits(bt * v, 0.0);
  for (int64_t i = 0; i < bt; ++i)
    for (int64_t j = 0; j < v; ++j)
      for (int64_t k = 0; k < h; ++k) logits[i * v + j] += input[i * h + k] * weight[j * h + k];
  return logits;
}

// What aclnnFusedLinearOnlineMaxSum computes from the logits of the shard.
struct ShardStatistics {
  std::vector<double> max, sumExp, predicted;  // (BT): max_j L_ij, sum_j exp(L_ij - max_i), L[i, t_i - start] - max_i
  std::vector<int64_t> maskedTarget;            // (BT): t_i - start in the shard, else 0
  // ceil(BT/8) bytes: bit i%8 of byte i/8 set when t_i is outside [start, end); the padding bits of the
  // last byte as for a target 0 (the vendor's golden pads the targets with 0).
  std::vector<uint8_t> targetMask;
};

// end < 0 means start + v (the whole shard).
inline ShardStatistics ShardReference(const std::vector<double>& logits, const std::vector<int64_t>& target,
                                      int64_t bt, int64_t v, int64_t start, int64_t end = -1) {
  if (end < 0) end = start + v;
  ShardStatistics s;
  s.max.assign(bt, -INFINITY);
  s.sumExp.assign(bt, 0.0);
  s.predicted.assign(bt, 0.0);
  s.maskedTarget.assign(bt, 0);
  s.targetMask.assign((bt + 7) / 8, 0);
  for (int64_t i = 0; i < bt; ++i) {
    for (int64_t j = 0; j < v; ++j) s.max[i] = std::fmax(s.max[i], logits[i * v + j]);
    for (int64_t j = 0; j < v; ++j) s.sumExp[i] += std::exp(logits[i * v + j] - s.max[i]);
    const bool outside = target[i] < start || target[i] >= end;
    if (outside) {
      s.targetMask[i / 8] = static_cast<uint8_t>(s.targetMask[i / 8] | (1u << (i % 8)));
    } else {
      s.maskedTarget[i] = target[i] - start;
      s.predicted[i] = logits[i * v + s.maskedTarget[i]] - s.max[i];
    }
  }
  for (int64_t i = bt; i < (bt + 7) / 8 * 8; ++i)
    if (0 < start || 0 >= end) s.targetMask[i / 8] = static_cast<uint8_t>(s.targetMask[i / 8] | (1u << (i % 8)));
  return s;
}

#endif  // TILEGRAD_TESTS_CPP_VENDOR_STYLE_VOCAB_PARALLEL_REFERENCE_H_
