// Vocabulary-parallel fused linear cross entropy (specification section 5) and the single-process
// fused op. Optional tensors are pointers (nullptr: absent). All functions throw tilegrad::Error.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/reduction.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// aclnnFusedLinearOnlineMaxSum: L = input @ weight^T (fp32 accumulate) over this rank's vocabulary
// shard [vocab_start, vocab_end) (weight has vocab_end - vocab_start rows); per row the max, the
// sum of exp(L - max), the target's logit minus the max (0 when the target is outside the shard), the
// bit-packed (LSB-first) mask "target outside the shard", the local target (0 when masked), and
// optionally L itself rounded to the input dtype.
TILEGRAD_API void fused_linear_online_max_sum(const TensorView& input, const TensorView& weight,
                                              const TensorView& target, int64_t vocab_start, int64_t vocab_end,
                                              const TensorView& logits_max, const TensorView& sum_exp_logits,
                                              const TensorView& predicted_logits, const TensorView& target_mask,
                                              const TensorView& masked_target, const TensorView* logits = nullptr);

// aclnnFusedCrossEntropyLossWithMaxSum: loss = log(sum_exp) - predicted; with logits (BT, V) also
// softmax = exp(logits - max) / sum_exp (softmax required then). label_smoothing must be 0.
TILEGRAD_API void fused_cross_entropy_loss_with_max_sum(const TensorView& logits_max,
                                                        const TensorView& sum_exp_logits,
                                                        const TensorView& predicted_logits, float label_smoothing,
                                                        const TensorView& loss, const TensorView* logits = nullptr,
                                                        const TensorView* softmax = nullptr);

// aclnnFusedLinearCrossEntropyLossGrad: G = softmax (given) or exp(input @ weight^T - max) / sum_exp
// (recomputed block by block); G[i, masked_target[i]] -= 1 where the mask bit is 0; G *= grad[i];
// G rounded to the input dtype; grad_input = G @ weight, grad_weight = G^T @ input (fp32 accumulate).
TILEGRAD_API void fused_linear_cross_entropy_loss_grad(
    const TensorView& grad, const TensorView& input, const TensorView& weight, const TensorView& target_mask,
    const TensorView& masked_target, float label_smoothing, const TensorView* logits_max,
    const TensorView* sum_exp_logits, const TensorView* softmax, const TensorView& grad_input,
    const TensorView& grad_weight);

// Single process: loss of cross_entropy(input @ weight^T, target, ignore_index, reduction) and both
// gradients (for an upstream gradient of 1 per loss element) in one call, without the (BT, V) logits.
// reduction: kNone (loss shape (BT)), kMean or kSum (loss shape ()). loss is float32.
TILEGRAD_API void fused_linear_cross_entropy(const TensorView& input, const TensorView& weight,
                                             const TensorView& target, int64_t ignore_index, Reduction reduction,
                                             const TensorView& loss, const TensorView& grad_input,
                                             const TensorView& grad_weight);

// The extras of the single-process op (PyTorch's F.linear_cross_entropy arguments plus z-loss and
// softcap). Logits z = softcap * tanh((input @ weight^T + bias) / softcap) (no cap when softcap = 0);
// per row ce_i = (1 - eps) w[t_i] (lse_i - z_{i,t_i}) + eps / V * sum_j w[j] (lse_i - z_ij) and
// zloss_i = lse_square_scale * lse_i^2 (0 on ignored rows); loss = ce + zloss with reduction
// none: per row; sum; mean: sum(ce) / sum(w[t_i]) + sum(zloss) / (non-ignored rows) (NaN over none).
// Gradients are those of sum_i g_i * loss_i, g = grad_output (scalar, or per row for "none").
// fused_linear_cross_entropy_ex computes only the gradients whose output is present: an absent
// grad_input / grad_weight (TensorView{}) or a null grad_bias is skipped (with neither grad_input nor
// grad_weight the three-GEMM plans run one GEMM, the loss).
struct FusedLinearCrossEntropyOptions {
  const TensorView* bias = nullptr;          // (V), input dtype
  const TensorView* class_weight = nullptr;  // (V), float32/float16/bfloat16
  float label_smoothing = 0.0f;              // [0, 1]
  float lse_square_scale = 0.0f;             // >= 0
  float softcap = 0.0f;                      // >= 0; 0 = no cap
  const TensorView* grad_output = nullptr;   // float32, one element, or (BT) for kNone; null = 1
  int64_t memory_budget = 0;                 // bytes for the plan choice; 0 = TILEGRAD_FLCE_BUDGET / default
  const TensorView* grad_bias = nullptr;     // output (V), input dtype; null: not computed
  const TensorView* z_loss = nullptr;        // output float32, loss's shape (the zloss part alone); optional
  // Gradient filtering (opt-in; Cut Cross Entropy): > 0 skips the gradient GEMMs' work on every
  // 64-row x 128-column block (of each G block of the plan) of the logits gradient whose entries,
  // divided by their row's softmax coefficient (the upstream gradient times the reduction's scale,
  // i.e. measured on p - onehot), all have magnitude < filter_eps: their contribution is dropped; the
  // loss stays exact; results stay independent of the thread count. 0: exact. Finite, >= 0.
  float filter_eps = 0.0f;
  int64_t* filter_blocks = nullptr;          // output [active, total] gradient blocks (diagnostics); optional
  // Error-bounded gradient filtering (opt-in; excludes filter_eps > 0): tau = filter_tolerance > 0.
  // Within each block of the logits gradient G the plan forms, a 64-row x 128-column block is left
  // out of grad_input = G @ weight only while, for every row i it covers, the dropped part of
  // S_i = sum_j |G_ij| * ||weight_j|| stays <= tau * S_i, hence ||dropped part of grad_input_i|| <=
  // tau * S_i (triangle inequality), whatever the distribution; likewise out of grad_weight =
  // G^T @ input per vocabulary column j with T_j = sum_i |G_ij| * ||input_i||. G rounded to the
  // input dtype (unit roundoff u) already moves grad_input_i by up to u * S_i: tau = u (Python's
  // default, 2^-8 for bfloat16) at most doubles that bound. NaN entries are never dropped; the loss
  // and grad_bias stay exact; results stay independent of the thread count. In [0, 1) (tau >= 1
  // bounds nothing: ||exact_i|| <= S_i, so every block could go); 0: off.
  float filter_tolerance = 0.0f;
  // grad_weight's bound under filter_tolerance: false (default) per column, tau * T_j; true with an
  // average floor, tau * (T_j + Tbar), Tbar = sum_k T_k / V: a column far under the average (a rare
  // token's, whose gradient is small entries spread over all rows) may then be dropped whole, which
  // the per-column bound never allows; columns above the average keep a 2 tau relative bound.
  bool filter_weight_average = false;
  struct FilterStats {
    int64_t blocks = 0;                      // 64 x 128 blocks of G
    int64_t input_blocks_run = 0;            // of which the grad_input product ran
    int64_t weight_blocks_run = 0;           // of which the grad_weight product ran
    double max_row_dropped = 0.0;            // max_i (dropped part of S_i) / S_i over the call
    double max_column_dropped = 0.0;         // max_j (dropped part) / T_j (+ Tbar: filter_weight_average)
  };
  FilterStats* filter_stats = nullptr;       // output with filter_tolerance > 0 (diagnostics); optional
};
TILEGRAD_API void fused_linear_cross_entropy_ex(const TensorView& input, const TensorView& weight,
                                                const TensorView& target, int64_t ignore_index, Reduction reduction,
                                                const TensorView& loss, const TensorView& grad_input,
                                                const TensorView& grad_weight,
                                                const FusedLinearCrossEntropyOptions& options);

}  // namespace tilegrad
