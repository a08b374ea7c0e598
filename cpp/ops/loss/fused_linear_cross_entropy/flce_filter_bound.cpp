// Error-bounded block selection (FlceFilterBound, flce_filter.h): per G block, the blocks each gradient
// product may leave out while every row's (column's) dropped share of its bound sum stays within the
// tolerance, and the tallies of what was dropped.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/loss/fused_linear_cross_entropy/flce_blocks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_filter.h"

namespace tilegrad::ops {

using core::GemmMatrix;

namespace {

// part / total, 0 for an empty part; NaN from a NaN anywhere (then the block is never dropped).
float share(float part, float total) { return part == 0.0f ? 0.0f : part / total; }
// m = max(m, x), except that a NaN, once seen, stays.
void take_max(float& m, float x) {
  if (std::isnan(x) || x > m) m = x;
}

// Of n blocks with shares share[k * stride], drops the smallest (ties: lower k first) while the
// dropped shares sum to at most tolerance: run[k * stride] = 0 for those, 1 for the others. The sum
// bounds the dropped fraction of every row (column) the blocks cover. NaN shares always run.
void drop_within_budget(const float* shares, int64_t n, int64_t stride, float tolerance, uint8_t* run) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const float x = shares[a * stride], y = shares[b * stride];
    return !std::isnan(x) && (std::isnan(y) || x < y);
  });
  double used = 0.0;
  for (int64_t i = 0; i < n; ++i) run[i * stride] = 1;
  for (int64_t k : order) {
    const double next = used + double(shares[k * stride]);
    if (!(next <= double(tolerance))) break;  // also stops at the first NaN
    used = next;
    run[k * stride] = 0;
  }
}

// What rows [first, last) may still drop: the tolerance, less the largest fraction of a row's
// whole-vocabulary bound (fb.row_bound) that earlier G blocks dropped; without row_bound each G
// block bounds its own part of the rows and has all of it.
float row_budget_left(const FlceFilterBound& fb, int64_t first, int64_t last) {
  if (!fb.row_bound) return fb.tolerance;
  double left = fb.tolerance;
  for (int64_t i = first; i < last; ++i)
    if (fb.row_dropped[i] > 0.0) left = std::min(left, double(fb.tolerance) - fb.row_dropped[i] / double(fb.row_bound[i]));
  return float(std::max(0.0, left));
}

// This G block's part of the average floor of grad_weight's bound (FlceFilterBound::weight_average;
// 0 without it): the parts of all G blocks sum to Tbar. t: the block's T per column, rows its rows.
float weight_floor(const FlceFilterBound& fb, const std::vector<float>& t, int64_t rows) {
  if (!fb.weight_average) return 0.0f;
  if (fb.weight_mean >= 0.0) return float(fb.weight_mean * double(rows) / double(fb.rows_total));
  double sum = 0.0;
  for (float x : t) sum += x;
  return float(sum / double(fb.vocab));
}

// Every block of the mask runs when fewer than min_share of them could be skipped (see
// flce_filter_min_skipped_share: then the per-block GEMMs would cost more than the skips save).
void run_whole_unless_worth_it(std::vector<uint8_t>& mask, double min_share) {
  const auto skipped = std::count(mask.begin(), mask.end(), uint8_t(0));
  if (double(skipped) < min_share * double(mask.size())) std::fill(mask.begin(), mask.end(), uint8_t(1));
}

// One G block's bound sums: d[r][cb] row r's part of S over column block cb, e[rb][j] column j's part
// of T over row block rb, and their totals over the G block, s[r] and t[j].
struct BlockSums {
  int64_t rows = 0, cols = 0, row_blocks = 0, col_blocks = 0;
  std::vector<float> d, e, s, t;
};

BlockSums block_sums(const FlceKernels* k, const FlceGBlock& block, const FlceFilterBound& fb, int threads) {
  const GemmMatrix& g = block.g;
  const int64_t es = dtype_size(g.dtype);
  BlockSums b;
  b.rows = g.rows;
  b.cols = g.cols;
  b.row_blocks = (b.rows + kFilterRows - 1) / kFilterRows;
  b.col_blocks = (b.cols + kFilterCols - 1) / kFilterCols;
  const int64_t rows = b.rows, cols = b.cols, rbs = b.row_blocks, cbs = b.col_blocks;
  b.d.resize(rows * cbs);
  b.e.assign(rbs * cols, 0.0f);
  b.s.assign(rows, 0.0f);
  b.t.assign(cols, 0.0f);
  const char* gp = static_cast<const char*>(g.data);
  // Column tiles of kBoundTileCols inside each row block, so that the tile's column norms and T
  // parts stay in L1 over the block's 64 rows (same sums, same order as whole rows).
  constexpr int64_t kBoundTileCols = 16 * kFilterCols;
  for_row_tiles(rbs, threads, [&](int64_t rb0, int64_t rb1) {
    for (int64_t rb = rb0; rb < rb1; ++rb) {
      const int64_t r0 = rb * kFilterRows, r1 = std::min(rows, r0 + kFilterRows);
      for (int64_t c0 = 0; c0 < cols; c0 += kBoundTileCols)
        for (int64_t r = r0; r < r1; ++r)
          k->bound_sums(gp + (r * g.row_stride + c0) * es, g.dtype, std::min(kBoundTileCols, cols - c0), kFilterCols,
                        fb.weight_norms + block.v0 + c0, fb.input_norms[block.b0 + r],
                        &b.d[r * cbs + c0 / kFilterCols], &b.e[rb * cols + c0]);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t cb = 0; cb < cbs; ++cb) b.s[r] += b.d[r * cbs + cb];
    }
  });
  for_row_tiles(cols, threads, [&](int64_t j0, int64_t j1) {
    for (int64_t rb = 0; rb < rbs; ++rb)
      for (int64_t j = j0; j < j1; ++j) b.t[j] += b.e[rb * cols + j];
  });
  return b;
}

// Each block's share ([row block][column block]): its largest row share (grad_input) and largest
// column share (grad_weight); rows' shares of their whole-vocabulary S_i where the forward gave it,
// else of this G block's part; columns' of T_j plus col_floor, this G block's part of the average floor.
struct BlockShares {
  std::vector<float> row, col;
};

BlockShares block_shares(const BlockSums& b, const FlceFilterBound& fb, int64_t b0, float col_floor, int threads) {
  const int64_t rows = b.rows, cols = b.cols, rbs = b.row_blocks, cbs = b.col_blocks;
  const auto row_sum = [&](int64_t r) { return fb.row_bound ? fb.row_bound[b0 + r] : b.s[r]; };
  BlockShares sh;
  sh.row.assign(rbs * cbs, 0.0f);
  sh.col.assign(rbs * cbs, 0.0f);
  for_row_tiles(rbs, threads, [&](int64_t rb0, int64_t rb1) {
    for (int64_t rb = rb0; rb < rb1; ++rb)
      for (int64_t cb = 0; cb < cbs; ++cb) {
        float& rs = sh.row[rb * cbs + cb];
        for (int64_t r = rb * kFilterRows; r < std::min(rows, (rb + 1) * kFilterRows); ++r)
          take_max(rs, share(b.d[r * cbs + cb], row_sum(r)));
        float& cs = sh.col[rb * cbs + cb];
        for (int64_t j = cb * kFilterCols; j < std::min(cols, (cb + 1) * kFilterCols); ++j)
          take_max(cs, share(b.e[rb * cols + j], b.t[j] + col_floor));
      }
  });
  return sh;
}

// The masks: per row block, the grad_input product drops its smallest shares within what the rows
// have left; per column block, grad_weight's within the tolerance; then each product runs whole
// unless enough blocks are skipped.
BoundedMasks masks_within_budget(const BlockSums& b, const BlockShares& sh, const FlceFilterBound& fb, int64_t b0,
                                 int threads) {
  const int64_t rows = b.rows, rbs = b.row_blocks, cbs = b.col_blocks;
  BoundedMasks m;
  m.row_blocks = rbs;
  m.col_blocks = cbs;
  m.input.assign(rbs * cbs, 1);
  m.weight.assign(rbs * cbs, 1);
  for_row_tiles(rbs, threads, [&](int64_t rb0, int64_t rb1) {
    for (int64_t rb = rb0; rb < rb1; ++rb)
      drop_within_budget(&sh.row[rb * cbs], cbs, 1,
                         row_budget_left(fb, b0 + rb * kFilterRows, b0 + std::min(rows, (rb + 1) * kFilterRows)),
                         &m.input[rb * cbs]);
  });
  for_row_tiles(cbs, threads, [&](int64_t cb0, int64_t cb1) {
    for (int64_t cb = cb0; cb < cb1; ++cb)
      drop_within_budget(&sh.col[cb], rbs, cbs, fb.tolerance, &m.weight[cb]);
  });
  run_whole_unless_worth_it(m.input, fb.min_skipped_share);
  run_whole_unless_worth_it(m.weight, fb.min_skipped_share);
  return m;
}

// What was really dropped, per row and column (diagnostics; fixed order), and the blocks run.
void add_tallies(const BlockSums& b, const BoundedMasks& m, float col_floor, const FlceGBlock& block,
                 FlceFilterBound& fb) {
  const int64_t cbs = b.col_blocks, rbs = b.row_blocks;
  for (int64_t r = 0; r < b.rows; ++r) {
    double dropped = 0.0;
    for (int64_t cb = 0; cb < cbs; ++cb)
      if (!m.input_at(r / kFilterRows, cb)) dropped += b.d[r * cbs + cb];
    fb.row_total[block.b0 + r] += b.s[r];
    fb.row_dropped[block.b0 + r] += dropped;
  }
  for (int64_t j = 0; j < b.cols; ++j) {
    double dropped = 0.0;
    for (int64_t rb = 0; rb < rbs; ++rb)
      if (!m.weight_at(rb, j / kFilterCols)) dropped += b.e[rb * b.cols + j];
    fb.col_total[block.v0 + j] += b.t[j] + col_floor;
    fb.col_dropped[block.v0 + j] += dropped;
  }
  fb.blocks += rbs * cbs;
  fb.input_blocks_run += std::count(m.input.begin(), m.input.end(), uint8_t(1));
  fb.weight_blocks_run += std::count(m.weight.begin(), m.weight.end(), uint8_t(1));
}

}  // namespace

BoundedMasks bounded_masks(const FlceKernels* k, const FlceGBlock& block, FlceFilterBound& fb, int threads) {
  const BlockSums sums = block_sums(k, block, fb, threads);
  const float col_floor = weight_floor(fb, sums.t, sums.rows);
  const BlockShares shares = block_shares(sums, fb, block.b0, col_floor, threads);
  BoundedMasks m = masks_within_budget(sums, shares, fb, block.b0, threads);
  add_tallies(sums, m, col_floor, block, fb);
  return m;
}

}  // namespace tilegrad::ops
