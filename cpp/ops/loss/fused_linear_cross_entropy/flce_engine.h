// The block loops of the fused linear cross-entropy family, shared by the aclnn operators and the
// single-process fused op: GEMMs through oneDNN (core/gemm.h, always called outside our parallel
// regions), row kernels (fused_linear_cross_entropy_kernel.h) in parallel_for over row tiles.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vec1.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_tiling.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

using core::Vec1;

struct FlceFilterBound;  // error-bounded filtering's state (flce_filter.h)

// The single-process op's extras, applied identically by every path (null everywhere for the aclnn
// operators). Logits z = softcap * tanh((input @ weight^T + bias) / softcap) (each step optional).
struct FlceFeatures {
  const float* bias = nullptr;     // (V) fp32 copy of the linear bias, or null
  float softcap = 0.0f;            // 0: no cap
  const float* class_w = nullptr;  // (V) fp32 class weights, or null (all 1)
  float* row_wsum = nullptr;       // forward: per row sum_j cw[j] z[j] (label smoothing), or null
  const float* row_target_coef = nullptr;   // gradient: per row target coefficient (null: = row grad)
  const float* row_uniform_coef = nullptr;  // gradient: per row uniform (label smoothing) coefficient
  float* grad_bias_acc = nullptr;  // (V) fp32: += column sums of G (rounded G), or null
  // Gradient filtering (opt-in, Cut Cross Entropy's idea): > 0 cuts each G block into kFilterRows x
  // kFilterCols blocks and skips both gradient GEMMs' work on every block whose entries all have
  // |g| < filter_eps * |the row's softmax coefficient|. 0: exact.
  float filter_eps = 0.0f;
  int64_t* filter_counts = nullptr;  // [active, total] G blocks, added to (diagnostics), or null
  FlceFilterBound* bound = nullptr;  // error-bounded filtering (then filter_eps is 0), or null
};

// Per-row loss terms and gradient coefficients of the single-process op (specification section 5 plus
// PyTorch's label smoothing / class weights, z-loss). ce = (1 - eps) w_t (lse - z_t) +
// eps / C * sum_j w_j (lse - z_j); zloss = lambda * lse^2; the gradient of
// scale * ce + zscale * zloss over z_j is coef_p * p_j - coef_t * (j == t) - coef_u * w_j.
struct FlceLossSpec {
  float eps = 0.0f, lambda = 0.0f;
  int64_t classes = 0;
  double class_w_total = 0.0;          // sum_j w_j (C without class weights)
  const float* scale = nullptr;        // per row (0 on ignored rows)
  const float* zscale = nullptr;       // per row
  const float* target_w = nullptr;     // per row w_t (1 without class weights)
};
struct FlceRowResult {
  float ce = 0.0f, zloss = 0.0f, coef_p = 0.0f, coef_t = 0.0f, coef_u = 0.0f;
};
// wz: sum_j w_j z_j (only read when eps > 0).
FlceRowResult flce_row_result(const FlceLossSpec& s, int64_t i, bool valid, float max, float sum_exp, float z_target,
                              float wz);

// True if oneDNN takes this 2-D view without a copy.
bool flce_gemmable(const TensorView& m);

// Forward blocks: max_out / sum_out get the row's max and sum-exp over this shard, pred_out
// L[i, local_target[i]] - max (0 where local_target[i] < 0); logits_out (optional) gets L rounded to
// its dtype.
void flce_forward_run(const FlceForwardTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* local_target, const Vec1& max_out, const Vec1& sum_out, const Vec1& pred_out,
                      const TensorView* logits_out, void* workspace, const FlceFeatures* features = nullptr);

// The operands of a gradient pass: input (BT x H) and weight (V x H), and the gradients it writes.
struct FlceOperands {
  const TensorView& input;
  const TensorView& weight;
  const TensorView& grad_input;
  const TensorView& grad_weight;
};

// A gradient pass's per-row inputs: the softmax coefficient (the row's upstream gradient), the
// forward's max and sum of exp (recomputed logits only), the target column (-1: none).
struct FlceGradRows {
  const float* grad = nullptr;
  const float* max = nullptr;
  const float* sum_exp = nullptr;
  const int64_t* target = nullptr;
};

// Gradient blocks. softmax is null in memory-saving mode (t.recompute: the logits are recomputed).
void flce_grad_run(const FlceGradTiling& t, const FlceOperands& m, const TensorView* softmax, const FlceGradRows& rows,
                   void* workspace, const FlceFeatures* features = nullptr);

// Per-row loss terms a pass writes (BT floats each; 0 on rows with target < 0).
struct FlceRowLosses {
  float* ce = nullptr;
  float* zloss = nullptr;
};

// Three-GEMM path of the single-process op (plans kWhole and kChunked; every operand oneDNN-ready):
// per row chunk L = input_c @ weight^T (fp32), per row the logits transform, max / sum-exp, loss
// terms and G (fp32 math, rounded once, in place over L for fp32 or into the G buffer), then
// grad_input_c = G @ weight and grad_weight (+)= G^T @ input_c accumulated in fp32 (the output
// itself for fp32 weights, else the V x H fp32 accumulator rounded once at the end). An absent
// gradient (undefined dtype) is not computed.
void flce_chunked_run(const FlceFusedTiling& t, const FlceOperands& m, const int64_t* target, const FlceLossSpec& spec,
                      const FlceFeatures& features, const FlceRowLosses& out, void* workspace);

// Writes zeros into every element of a view.
void flce_fill_zero(const TensorView& t);

}  // namespace tilegrad::ops
