#include "ops/loss/fused_linear_cross_entropy/flce_filter_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/loss/fused_linear_cross_entropy/flce_blocks.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_tiling.h"

namespace tilegrad::ops {
namespace {

// Row norms ||m_r|| (fp32 of fp32 sums of squares) of a (rows x cols) matrix of any float dtype / strides.
std::vector<float> row_norms(const TensorView& m, Isa isa, int threads) {
  const int64_t rows = m.shape[0], cols = m.shape[1], es = dtype_size(m.dtype);
  const FlceKernels* k = flce_kernels(isa);
  std::vector<float> out(rows);
  for_row_tiles(rows, threads, [&](int64_t r0, int64_t r1) {
    std::vector<char> row(m.strides[1] == 1 ? 0 : cols * es);
    for (int64_t r = r0; r < r1; ++r) {
      const char* src = static_cast<const char*>(m.data) + r * m.strides[0] * es;
      if (!row.empty()) {  // a strided row, gathered
        for (int64_t c = 0; c < cols; ++c) std::memcpy(&row[c * es], src + c * m.strides[1] * es, es);
        src = row.data();
      }
      out[r] = std::sqrt(k->sum_squares(src, m.dtype, cols));
    }
  });
  return out;
}

// sum_j |G_ij| c_j for one row with G_ij = cp p_j - ct [j == t] (no label smoothing or softcap),
// from weighted = sum_j p_j c_j over the whole vocabulary, p_t and c_t (target < 0: no such term).
double abs_weighted_row(double weighted, bool has_target, double pt, double ct_weight, float cp, float ct) {
  if (!has_target) return std::fabs(double(cp)) * weighted;
  return std::fabs(double(cp)) * std::max(0.0, weighted - pt * ct_weight) + std::fabs(double(cp) * pt - ct) * ct_weight;
}

// The vocabulary-outer plan's whole-row quantities of the bound, from the forward's statistics
// (p_j = exp(z_j - max) / sum; pred = z_t - max): each row's S_i = sum_j |G_ij| ||W_j|| (from
// A_i = sum_j exp(z_j - max) ||W_j||), and Tbar = sum_j T_j / V = sum_i ||x_i|| sum_j |G_ij| / V.
struct WholeRowBounds {
  std::vector<float> row_bound;
  double weight_mean = 0.0;
};
WholeRowBounds whole_row_bounds(const std::vector<float>& exp_norm_sum, const std::vector<float>& weight_norms,
                                const std::vector<float>& input_norms, const std::vector<int64_t>& col,
                                const std::vector<float>& sum, const std::vector<float>& pred,
                                const std::vector<float>& cp, const std::vector<float>& ct) {
  WholeRowBounds b;
  b.row_bound.resize(col.size());
  double t_total = 0.0;
  for (size_t i = 0; i < col.size(); ++i) {
    const bool has_t = col[i] >= 0;
    const double pt = has_t ? std::exp(double(pred[i])) / double(sum[i]) : 0.0;
    const double nt = has_t ? weight_norms[col[i]] : 0.0;
    b.row_bound[i] = float(abs_weighted_row(double(exp_norm_sum[i]) / double(sum[i]), has_t, pt, nt, cp[i], ct[i]));
    t_total += double(input_norms[i]) * abs_weighted_row(1.0, has_t, pt, 1.0, cp[i], ct[i]);
  }
  b.weight_mean = t_total / double(weight_norms.size());
  return b;
}

// Largest dropped / total over entries with a positive total (0 when nothing was dropped).
double largest_fraction(const std::vector<double>& dropped, const std::vector<double>& total) {
  double worst = 0.0;
  for (size_t i = 0; i < total.size(); ++i)
    if (total[i] > 0.0 && dropped[i] > 0.0) worst = std::max(worst, dropped[i] / total[i]);
  return worst;
}

}  // namespace

FlceBoundTallies::FlceBoundTallies(const TensorView& input, const TensorView& weight,
                                   const FusedLinearCrossEntropyOptions& o, Isa isa, int threads) {
  const int64_t bt = input.shape[0], v = weight.shape[0];
  weight_norms_ = row_norms(weight, isa, threads);
  input_norms_ = row_norms(input, isa, threads);
  row_total_.assign(bt, 0.0);
  row_dropped_.assign(bt, 0.0);
  col_total_.assign(v, 0.0);
  col_dropped_.assign(v, 0.0);
  state_.tolerance = o.filter_tolerance;
  state_.min_skipped_share = flce_filter_min_skipped_share();
  state_.weight_average = o.filter_weight_average;
  state_.vocab = v;
  state_.rows_total = bt;
  state_.weight_norms = weight_norms_.data();
  state_.input_norms = input_norms_.data();
  state_.row_total = row_total_.data();
  state_.row_dropped = row_dropped_.data();
  state_.col_total = col_total_.data();
  state_.col_dropped = col_dropped_.data();
}

void FlceBoundTallies::collect_exp_norm_sums() {
  row_exp_norm_sum_.assign(row_total_.size(), 0.0f);
  state_.row_exp_norm_sum = row_exp_norm_sum_.data();
}

void FlceBoundTallies::whole_rows_from_forward(const std::vector<int64_t>& col, const std::vector<float>& sum,
                                               const std::vector<float>& pred, const std::vector<float>& cp,
                                               const std::vector<float>& ct) {
  state_.row_exp_norm_sum = nullptr;
  WholeRowBounds whole = whole_row_bounds(row_exp_norm_sum_, weight_norms_, input_norms_, col, sum, pred, cp, ct);
  row_bound_ = std::move(whole.row_bound);
  state_.row_bound = row_bound_.data();
  state_.weight_mean = whole.weight_mean;
}

FusedLinearCrossEntropyOptions::FilterStats FlceBoundTallies::stats() const {
  FusedLinearCrossEntropyOptions::FilterStats st;
  st.blocks = state_.blocks;
  st.input_blocks_run = state_.input_blocks_run;
  st.weight_blocks_run = state_.weight_blocks_run;
  st.max_row_dropped = largest_fraction(row_dropped_, row_total_);
  st.max_column_dropped = largest_fraction(col_dropped_, col_total_);
  return st;
}

}  // namespace tilegrad::ops
