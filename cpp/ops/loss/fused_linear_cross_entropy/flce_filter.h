// Gradient filtering of the fused linear cross entropy (the single-process op's filter_eps and
// filter_tolerance): each G block of a plan is cut into kFilterRows x kFilterCols blocks, a block
// selection decides which of them each gradient product runs, and the products run over those only.
//
//   unbounded (filter_eps, Cut Cross Entropy's test)   flce_filter.cpp: a block runs when one of its
//                                                      entries reaches eps times its row's coefficient
//   error-bounded (filter_tolerance)                   flce_filter_bound.cpp: blocks are dropped while
//                                                      every row's / column's dropped share stays
//                                                      within the tolerance (FlceFilterBound)
//   statistics (blocks run, largest dropped shares)    flce_filter_stats.*
#pragma once

#include <cstdint>
#include <vector>

#include "core/gemm.h"
#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"

namespace tilegrad::ops {

constexpr int64_t kFilterRows = 64;   // rows of G per filtering block
constexpr int64_t kFilterCols = 128;  // vocabulary columns of G per filtering block

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

// One dense G block of a plan: rows b0.. and vocabulary columns v0.. of the problem, the operand rows
// its gradient products read (x_rows: input rows b0.., w_rows: weight rows v0..), and each G row's
// softmax coefficient (row_scale: the unbounded filter's threshold scale, see find_active_blocks).
struct FlceGBlock {
  core::GemmMatrix g;
  int64_t b0 = 0, v0 = 0;
  const float* row_scale = nullptr;
  core::GemmMatrix x_rows, w_rows;
};

// Where one gradient of a filtered G block goes. With acc (fp32 rows that accumulate across G
// blocks: the fp32 output itself or an accumulator), written[row] says whether the row holds a
// partial sum yet (the first product overwrites it); rows never written are zeroed by
// zero_unwritten_rows at the end. Without acc, out gets its final value from this G block alone
// (products into a per-block fp32 scratch rounded once, or into out itself when it is fp32; zeros
// where no block is active).
struct FilteredDst {
  core::GemmMatrix acc;  // data null: none
  uint8_t* written = nullptr;
  core::GemmMatrix out;
  bool wanted() const { return acc.data || out.data; }  // neither: a gradient the caller did not ask for
};
FilteredDst accumulate_into(const core::GemmMatrix& acc, uint8_t* written);
FilteredDst complete_into(const core::GemmMatrix& out);

// Both gradient products of one filtered G block: gin (+)= G @ w_rows and gw (+)= G^T @ x_rows,
// skipping the blocks the selection (f.bound, else f.filter_eps) leaves out; counts blocks into
// f.filter_counts.
void filtered_gradients(const FlceKernels* k, const FlceGBlock& block, const FlceFeatures& f, const FilteredDst& gin,
                        const FilteredDst& gw, int threads);

// Rows of an fp32 accumulator that no active block reached are zero (one store per run of such
// rows); the flags are reset for reuse.
void zero_unwritten_rows(const FlceKernels* k, const core::GemmMatrix& acc, uint8_t* written);

// Error-bounded block selection (flce_filter_bound.cpp): which blocks of a G block each product runs
// ([row block][column block], 1: runs).
struct BoundedMasks {
  int64_t row_blocks = 0, col_blocks = 0;
  std::vector<uint8_t> input, weight;
  bool input_at(int64_t rb, int64_t cb) const { return input[rb * col_blocks + cb] != 0; }
  bool weight_at(int64_t rb, int64_t cb) const { return weight[rb * col_blocks + cb] != 0; }
};
// The two masks of the G block; adds each row's and column's bound sum and dropped part to fb.
BoundedMasks bounded_masks(const FlceKernels* k, const FlceGBlock& block, FlceFilterBound& fb, int threads);

}  // namespace tilegrad::ops
