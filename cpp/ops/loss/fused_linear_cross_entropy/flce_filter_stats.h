// The single-process op's error-bounded filtering state (filter_tolerance, flce_filter.h): both
// operands' row norms, the per-row and per-column tallies the block selection adds to, the
// vocabulary-outer plan's whole-row bound sums, and the statistics a call reports
// (FusedLinearCrossEntropyOptions::FilterStats).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/loss/fused_linear_cross_entropy/flce_filter.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

class FlceBoundTallies {
 public:
  // Row norms of input (BT x H) and weight (V x H), zero tallies; the bound's other settings from the
  // options (tolerance, average floor) and TILEGRAD_FLCE_FILTER_MIN_SKIP.
  FlceBoundTallies(const TensorView& input, const TensorView& weight, const FusedLinearCrossEntropyOptions& o, Isa isa,
                   int threads);
  FlceBoundTallies(const FlceBoundTallies&) = delete;
  FlceBoundTallies& operator=(const FlceBoundTallies&) = delete;

  // What the block selection reads and adds to.
  FlceFilterBound& bound() { return state_; }

  // The vocabulary-outer plan bounds whole rows: the forward sums each row's exp(z_j - max) ||W_j||
  // (collect_exp_norm_sums before it), then whole_rows_from_forward turns them, with the forward's
  // statistics (col: target column or -1; sum of exp; pred = z_t - max; the coefficients of p and of
  // the target), into each row's S_i and the average floor's Tbar for the gradient pass.
  void collect_exp_norm_sums();
  void whole_rows_from_forward(const std::vector<int64_t>& col, const std::vector<float>& sum,
                               const std::vector<float>& pred, const std::vector<float>& cp,
                               const std::vector<float>& ct);

  // The call's statistics: blocks run and the largest dropped fractions.
  FusedLinearCrossEntropyOptions::FilterStats stats() const;

 private:
  std::vector<float> weight_norms_, input_norms_;
  std::vector<double> row_total_, row_dropped_, col_total_, col_dropped_;
  std::vector<float> row_exp_norm_sum_, row_bound_;
  FlceFilterBound state_;
};

}  // namespace tilegrad::ops
