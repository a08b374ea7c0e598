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
  struct FlceFilterBound* bound = nullptr;  // error-bounded filtering (then filter_eps is 0), or null
};

// Error-bounded gradient filtering (the single-process op's filter_tolerance): in each G block of the
// plan, a kFilterRows x kFilterCols block is left out of grad_input = G @ W while, for every row i
// it covers, the dropped part of S_i = sum_j |g_ij| ||W_j|| stays within tolerance * S_i (so
// ||dropped part of grad_input_i|| <= tolerance * S_i), and out of grad_weight = G^T @ X while, for
// every column j, the dropped part of T_j = sum_i |g_ij| ||x_i|| stays within tolerance * T_j. Each
// block counts with its largest row (column) share; both products have their own mask. A bound
// holding in every G block holds for the sums over them.
struct FlceFilterBound {
  float tolerance = 0.0f;
  double min_skipped_share = 0.0;  // a product with fewer skippable blocks runs whole (see the tiling)
  const float* weight_norms = nullptr;  // (V) ||W_j||, fp32
  const float* input_norms = nullptr;   // (BT) ||x_i||, fp32
  // Per row (BT) and vocabulary column (V): S / T summed over the G blocks, and their dropped parts.
  double* row_total = nullptr;
  double* row_dropped = nullptr;
  double* col_total = nullptr;
  double* col_dropped = nullptr;
  // Rows' whole-vocabulary bound sums, for plans whose G blocks hold part of a row (vocabulary
  // outer): the forward adds each row's sum_j exp(z_j - max) ||W_j|| (online, as its sum of exp)
  // into row_exp_norm_sum; the caller then sets row_bound[i] = S_i, and every G block drops within
  // what is left of tolerance * S_i. Both null: each G block bounds its own part of the row.
  float* row_exp_norm_sum = nullptr;
  const float* row_bound = nullptr;
  // grad_weight's bound with an average floor (weight_average): column j may drop up to
  // tolerance * (T_j + Tbar), Tbar = sum_k T_k / vocab, so a column far under the average (a rare
  // token's) may go whole. Each G block gets its part of Tbar: its own sum of T / vocab (G blocks
  // holding every column), or weight_mean * its rows / rows_total when the caller knows Tbar
  // (weight_mean >= 0: the vocabulary-outer plan, from the forward).
  bool weight_average = false;
  int64_t vocab = 0, rows_total = 0;
  double weight_mean = -1.0;
  int64_t blocks = 0, input_blocks_run = 0, weight_blocks_run = 0;  // added to
};

// Row norms ||m_r|| (fp32 of fp32 sums of squares) of a (rows x cols) matrix of any float dtype / strides.
std::vector<float> flce_row_norms(const TensorView& m, Isa isa, int threads);

constexpr int64_t kFilterRows = 64;   // rows of G per filtering block
constexpr int64_t kFilterCols = 128;  // vocabulary columns of G per filtering block

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

// Gradient blocks. Per row: grad, max, sum_exp (unused with a softmax), target column (-1: none).
// softmax is null in memory-saving mode (t.recompute).
void flce_grad_run(const FlceGradTiling& t, const TensorView& input, const TensorView& weight,
                   const TensorView* softmax, const float* row_grad, const float* row_max, const float* row_sum,
                   const int64_t* row_target, const TensorView& grad_input, const TensorView& grad_weight,
                   void* workspace, const FlceFeatures* features = nullptr);

// Three-GEMM path of the single-process op (plans kWhole and kChunked; every operand oneDNN-ready):
// per row chunk L = input_c @ weight^T (fp32), per row the logits transform, max / sum-exp, loss
// terms and G (fp32 math, rounded once, in place over L for fp32 or into the G buffer), then
// grad_input_c = G @ weight and grad_weight (+)= G^T @ input_c accumulated in fp32 (the output
// itself for fp32 weights, else the V x H fp32 accumulator rounded once at the end).
// row_ce / row_zloss get each row's loss terms (0 on rows with target < 0).
void flce_chunked_run(const FlceFusedTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* target, const FlceLossSpec& spec, const FlceFeatures& features, float* row_ce,
                      float* row_zloss, const TensorView& grad_input, const TensorView& grad_weight, void* workspace);

// Writes zeros into every element of a view.
void flce_fill_zero(const TensorView& t);

}  // namespace tilegrad::ops
