#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "core/gemm.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"

namespace tilegrad::ops {
namespace {

using core::GemmMatrix;

GemmMatrix matrix_of(const TensorView& t) {
  return GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
}

char* at(void* base, uint64_t offset) { return static_cast<char*>(base) + offset; }

// Runs fn(r0, r1) over [0, rows) in contiguous row ranges (about 8 per thread) handed out first
// come, first served, so a preempted thread does not hold the others up. Every row is computed
// by one call on its own, so the split never changes a result.
template <class Fn>
void for_row_tiles(int64_t rows, int threads, Fn&& fn) {
  if (rows <= 0) return;
  const int team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  if (team == 1 || core::in_parallel_region()) return fn(int64_t(0), rows);
  const int64_t per = std::max<int64_t>(1, rows / (int64_t(team) * 8));
  const int64_t tiles = (rows + per - 1) / per;
  std::atomic<int64_t> next{0};
  core::parallel_for(team, team, [&](int64_t) {
    for (int64_t tile = next.fetch_add(1); tile < tiles; tile = next.fetch_add(1))
      fn(tile * per, std::min(rows, (tile + 1) * per));
  });
}

// The matrix oneDNN reads: the view itself, or a row-major copy of it in the workspace.
GemmMatrix operand(const TensorView& t, void* copy, int threads) {
  if (!copy) return matrix_of(t);
  const int64_t rows = t.shape[0], cols = t.shape[1], es = dtype_size(t.dtype);
  const char* src = static_cast<const char*>(t.data);
  char* dst = static_cast<char*>(copy);
  for_row_tiles(rows, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(dst + (r * cols + c) * es, src + (r * t.strides[0] + c * t.strides[1]) * es, es);
  });
  return GemmMatrix::rowmajor(copy, t.dtype, rows, cols, cols);
}

// dst rows [r0, r0 + n) (a 2-D view) = fp32 rows of src (ld = cols), rounded once.
void cast_rows(const FlceKernels* k, const float* src, const TensorView& dst, int64_t r0, int64_t n, int threads) {
  const int64_t cols = dst.shape[1], es = dtype_size(dst.dtype);
  char* base = static_cast<char*>(dst.data);
  for_row_tiles(n, threads, [&](int64_t a, int64_t b) {
    for (int64_t r = a; r < b; ++r)
      k->cast_row(src + r * cols, cols, dst.dtype, base + (r0 + r) * dst.strides[0] * es, dst.strides[1]);
  });
}

// acc[v0 + j] += sum over the block's rows of G[r][j], rows in order (so every column's sum has one
// order whatever the thread count); columns split across threads.
void accumulate_columns(const FlceKernels* k, float* acc, const char* g, DType dt, int64_t rows, int64_t cols,
                        int threads) {
  const int64_t es = dtype_size(dt);
  const int64_t tiles = std::max<int64_t>(1, std::min<int64_t>(threads, (cols + 255) / 256));
  const int64_t per = ((cols + tiles - 1) / tiles + 15) / 16 * 16;
  core::parallel_for(tiles, threads, [&](int64_t tile) {
    const int64_t c0 = tile * per, c1 = std::min(cols, c0 + per);
    if (c0 >= c1) return;
    for (int64_t r = 0; r < rows; ++r) k->accumulate_row(acc + c0, g + (r * cols + c0) * es, dt, c1 - c0);
  });
}

// ---- Gradient filtering ----------------------------------------------------------------------

// Which kFilterRows x kFilterCols blocks of a dense G block (rows x cols, ld cols) hold an entry
// with |g| >= eps * |row_scale[r]| (and g != 0). G = row_scale * (p - y - ...), so the threshold
// applies to the unscaled softmax gradient, as in Cut Cross Entropy: the upstream gradient and the
// reduction's 1/N do not change what is filtered.
struct ActiveBlocks {
  int64_t row_blocks = 0, col_blocks = 0;
  std::vector<uint8_t> flags;  // [row block][column block]
  bool at(int64_t rb, int64_t cb) const { return flags[rb * col_blocks + cb] != 0; }
  int64_t count() const { return std::count(flags.begin(), flags.end(), uint8_t(1)); }
};

ActiveBlocks find_active_blocks(const FlceKernels* k, const char* g, DType dt, int64_t rows, int64_t cols, float eps,
                                const float* row_scale, int threads) {
  const float smallest = std::numeric_limits<float>::denorm_min();  // zeros are never active
  ActiveBlocks a;
  a.row_blocks = (rows + kFilterRows - 1) / kFilterRows;
  a.col_blocks = (cols + kFilterCols - 1) / kFilterCols;
  a.flags.assign(a.row_blocks * a.col_blocks, 0);
  const int64_t es = dtype_size(dt);
  for_row_tiles(a.row_blocks, threads, [&](int64_t b0, int64_t b1) {
    for (int64_t rb = b0; rb < b1; ++rb)
      for (int64_t r = rb * kFilterRows; r < std::min(rows, (rb + 1) * kFilterRows); ++r)
        k->mark_active(g + r * cols * es, dt, cols, kFilterCols, std::max(eps * std::fabs(row_scale[r]), smallest),
                       &a.flags[rb * a.col_blocks]);
  });
  return a;
}

// ---- Error-bounded filtering (FlceFilterBound) ----

// Which blocks of a G block each product runs ([row block][column block], 1: runs).
struct BoundedMasks {
  int64_t row_blocks = 0, col_blocks = 0;
  std::vector<uint8_t> input, weight;
  bool input_at(int64_t rb, int64_t cb) const { return input[rb * col_blocks + cb] != 0; }
  bool weight_at(int64_t rb, int64_t cb) const { return weight[rb * col_blocks + cb] != 0; }
};

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

// The two masks of one G block g (rows b0.., vocabulary columns v0.. of the whole problem); adds
// each row's and column's bound sum and dropped part to fb.
BoundedMasks bounded_masks(const FlceKernels* k, const GemmMatrix& g, int64_t b0, int64_t v0, FlceFilterBound& fb,
                           int threads) {
  const int64_t rows = g.rows, cols = g.cols, es = dtype_size(g.dtype);
  BoundedMasks m;
  m.row_blocks = (rows + kFilterRows - 1) / kFilterRows;
  m.col_blocks = (cols + kFilterCols - 1) / kFilterCols;
  const int64_t rbs = m.row_blocks, cbs = m.col_blocks;
  // d[r][cb]: row r's part of S over column block cb; e[rb][j]: column j's part of T over row block rb
  std::vector<float> d(rows * cbs), e(rbs * cols, 0.0f), s(rows, 0.0f), t(cols, 0.0f);
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
                        fb.weight_norms + v0 + c0, fb.input_norms[b0 + r], &d[r * cbs + c0 / kFilterCols],
                        &e[rb * cols + c0]);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t cb = 0; cb < cbs; ++cb) s[r] += d[r * cbs + cb];
    }
  });
  for_row_tiles(cols, threads, [&](int64_t j0, int64_t j1) {
    for (int64_t rb = 0; rb < rbs; ++rb)
      for (int64_t j = j0; j < j1; ++j) t[j] += e[rb * cols + j];
  });
  // Each block's share: its largest row share (grad_input) and largest column share (grad_weight),
  // rows' shares of their whole-vocabulary S_i where the forward gave it, else of this block's part;
  // columns' of T_j, plus this block's part of the average floor (weight_average).
  const auto row_sum = [&](int64_t r) { return fb.row_bound ? fb.row_bound[b0 + r] : s[r]; };
  const float col_floor = weight_floor(fb, t, rows);
  std::vector<float> row_share(rbs * cbs, 0.0f), col_share(rbs * cbs, 0.0f);
  for_row_tiles(rbs, threads, [&](int64_t rb0, int64_t rb1) {
    for (int64_t rb = rb0; rb < rb1; ++rb)
      for (int64_t cb = 0; cb < cbs; ++cb) {
        float& rs = row_share[rb * cbs + cb];
        for (int64_t r = rb * kFilterRows; r < std::min(rows, (rb + 1) * kFilterRows); ++r)
          take_max(rs, share(d[r * cbs + cb], row_sum(r)));
        float& cs = col_share[rb * cbs + cb];
        for (int64_t j = cb * kFilterCols; j < std::min(cols, (cb + 1) * kFilterCols); ++j)
          take_max(cs, share(e[rb * cols + j], t[j] + col_floor));
      }
  });
  m.input.assign(rbs * cbs, 1);
  m.weight.assign(rbs * cbs, 1);
  for_row_tiles(rbs, threads, [&](int64_t rb0, int64_t rb1) {
    for (int64_t rb = rb0; rb < rb1; ++rb)
      drop_within_budget(&row_share[rb * cbs], cbs, 1,
                         row_budget_left(fb, b0 + rb * kFilterRows, b0 + std::min(rows, (rb + 1) * kFilterRows)),
                         &m.input[rb * cbs]);
  });
  for_row_tiles(cbs, threads, [&](int64_t cb0, int64_t cb1) {
    for (int64_t cb = cb0; cb < cb1; ++cb)
      drop_within_budget(&col_share[cb], rbs, cbs, fb.tolerance, &m.weight[cb]);
  });
  run_whole_unless_worth_it(m.input, fb.min_skipped_share);
  run_whole_unless_worth_it(m.weight, fb.min_skipped_share);
  // What was really dropped, per row and column (diagnostics; fixed order).
  for (int64_t r = 0; r < rows; ++r) {
    double dropped = 0.0;
    for (int64_t cb = 0; cb < cbs; ++cb)
      if (!m.input_at(r / kFilterRows, cb)) dropped += d[r * cbs + cb];
    fb.row_total[b0 + r] += s[r];
    fb.row_dropped[b0 + r] += dropped;
  }
  for (int64_t j = 0; j < cols; ++j) {
    double dropped = 0.0;
    for (int64_t rb = 0; rb < rbs; ++rb)
      if (!m.weight_at(rb, j / kFilterCols)) dropped += e[rb * cols + j];
    fb.col_total[v0 + j] += t[j] + col_floor;
    fb.col_dropped[v0 + j] += dropped;
  }
  fb.blocks += rbs * cbs;
  fb.input_blocks_run += std::count(m.input.begin(), m.input.end(), uint8_t(1));
  fb.weight_blocks_run += std::count(m.weight.begin(), m.weight.end(), uint8_t(1));
  return m;
}

// Where one gradient of a filtered G block goes. With acc (fp32 rows that accumulate across G
// blocks: the fp32 output itself or an accumulator), written[row] says whether the row holds a
// partial sum yet (the first product overwrites it); rows never written are zeroed by
// zero_unwritten_rows at the end. Without acc, out gets its final value from this G block alone
// (products into a per-block fp32 scratch rounded once, or into out itself when it is fp32; zeros
// where no block is active).
struct FilteredDst {
  GemmMatrix acc;  // data null: none
  uint8_t* written = nullptr;
  GemmMatrix out;
  bool wanted() const { return acc.data || out.data; }  // neither: a gradient the caller did not ask for
};

// Output rows of m (any dtype, any strides) = fp32 rows of src (ld = m.cols; null: zeros).
void store_rows(const FlceKernels* k, const float* src, const GemmMatrix& m) {
  const int64_t es = dtype_size(m.dtype);
  const std::vector<float> zeros(src ? 0 : m.cols, 0.0f);
  for (int64_t r = 0; r < m.rows; ++r)
    k->cast_row(src ? src + r * m.cols : zeros.data(), m.cols, m.dtype,
                static_cast<char*>(m.data) + r * m.row_stride * es, m.col_stride);
}

// dst (+)= a @ b over the active blocks only. a (n x m) is cut into blocks of out_block rows by
// red_block columns, active(o, r) telling output block o, reduction block r; b is (m x H). Each
// output block's products (runs of adjacent active blocks merged into one GEMM) run in a fixed
// order on one thread, output blocks spread over the threads: the result is independent of the
// thread count.
template <class Active>
void filtered_product(const FlceKernels* k, const GemmMatrix& a, const GemmMatrix& b, int64_t out_block,
                      int64_t red_block, const Active& active, const FilteredDst& dst, int threads) {
  const int64_t n = a.rows, m = a.cols, h = b.cols;
  const int64_t out_blocks = (n + out_block - 1) / out_block, red_blocks = (m + red_block - 1) / red_block;
  const bool into_out = !dst.acc.data && dst.out.dtype == DType::kFloat32;
  for_row_tiles(out_blocks, threads, [&](int64_t ob0, int64_t ob1) {
    std::vector<float> scratch;
    for (int64_t o = ob0; o < ob1; ++o) {
      const int64_t o0 = o * out_block, on = std::min(out_block, n - o0);
      GemmMatrix target;
      if (dst.acc.data) target = dst.acc.row_block(o0, on);
      else if (into_out) target = dst.out.row_block(o0, on);
      else {
        scratch.resize(on * h);
        target = GemmMatrix::rowmajor(scratch.data(), DType::kFloat32, on, h, h);
      }
      bool has = dst.acc.data && dst.written[o0];
      for (int64_t r = 0; r < red_blocks;) {
        if (!active(o, r)) {
          ++r;
          continue;
        }
        int64_t r1 = r + 1;
        while (r1 < red_blocks && active(o, r1)) ++r1;
        const int64_t c0 = r * red_block, cn = std::min(m, r1 * red_block) - c0;
        core::gemm(a.row_block(o0, on).col_block(c0, cn), b.row_block(c0, cn), target, has, 1);
        has = true;
        r = r1;
      }
      if (dst.acc.data) {
        if (has) std::memset(dst.written + o0, 1, on);
      } else if (!has) {
        store_rows(k, nullptr, dst.out.row_block(o0, on));
      } else if (!into_out) {
        store_rows(k, scratch.data(), dst.out.row_block(o0, on));
      }
    }
  });
}

// Rows of an fp32 accumulator that no active block reached are zero (one store per run of such
// rows); the flags are reset for reuse.
void zero_unwritten_rows(const FlceKernels* k, const GemmMatrix& acc, uint8_t* written) {
  for (int64_t r = 0; r < acc.rows;) {
    int64_t r1 = r + 1;
    while (r1 < acc.rows && (written[r1] != 0) == (written[r] != 0)) ++r1;
    if (!written[r]) store_rows(k, nullptr, acc.row_block(r, r1 - r));
    r = r1;
  }
  std::memset(written, 0, acc.rows);
}

// dst (+)= a @ b whole, for a mask with every block active: the exact path's one GEMM (shape-only
// blocks over all threads) instead of one GEMM per output block.
void whole_product(const FlceKernels* k, const GemmMatrix& a, const GemmMatrix& b, const FilteredDst& dst,
                   int threads) {
  if (!dst.acc.data) return core::gemm(a, b, dst.out, false, threads);
  zero_unwritten_rows(k, dst.acc, dst.written);  // (rows without a partial sum yet start from 0)
  core::gemm(a, b, dst.acc, true, threads);
  std::memset(dst.written, 1, dst.acc.rows);
}

bool all_set(const std::vector<uint8_t>& flags) {
  return std::all_of(flags.begin(), flags.end(), [](uint8_t f) { return f != 0; });
}

// One gradient product of a filtered G block: nothing for a gradient not asked for, the exact
// path's one GEMM when every block runs (all_active), else one GEMM per run of active blocks.
template <class Active>
void block_product(const FlceKernels* k, const GemmMatrix& a, const GemmMatrix& b, int64_t out_block,
                   int64_t red_block, bool all_active, const Active& active, const FilteredDst& dst, int threads) {
  if (!dst.wanted()) return;
  if (all_active) return whole_product(k, a, b, dst, threads);
  filtered_product(k, a, b, out_block, red_block, active, dst, threads);
}

// Both gradient products of one filtered G block g (bc x vc, dense; rows b0.., columns v0.. of the
// problem): gin (+)= G @ w_rows and gw (+)= G^T @ x_rows, skipping inactive blocks.
// row_scale: each G row's softmax coefficient (see find_active_blocks).
void filtered_gradients(const FlceKernels* k, const GemmMatrix& g, int64_t b0, int64_t v0, const float* row_scale,
                        const GemmMatrix& x_rows, const GemmMatrix& w_rows, const FlceFeatures& f,
                        const FilteredDst& gin, const FilteredDst& gw, int threads) {
  if (f.bound) {
    const BoundedMasks m = bounded_masks(k, g, b0, v0, *f.bound, threads);
    if (f.filter_counts) {
      for (size_t b = 0; b < m.input.size(); ++b) f.filter_counts[0] += (m.input[b] | m.weight[b]) != 0;
      f.filter_counts[1] += int64_t(m.input.size());
    }
    block_product(
        k, g, w_rows, kFilterRows, kFilterCols, all_set(m.input),
        [&](int64_t o, int64_t r) { return m.input_at(o, r); }, gin, threads);
    block_product(
        k, g.t(), x_rows, kFilterCols, kFilterRows, all_set(m.weight),
        [&](int64_t o, int64_t r) { return m.weight_at(r, o); }, gw, threads);
    return;
  }
  const ActiveBlocks act = find_active_blocks(k, static_cast<const char*>(g.data), g.dtype, g.rows, g.cols,
                                              f.filter_eps, row_scale, threads);
  if (f.filter_counts) {
    f.filter_counts[0] += act.count();
    f.filter_counts[1] += int64_t(act.flags.size());
  }
  // (the unbounded filter keeps its per-block products even when every block is active)
  block_product(
      k, g, w_rows, kFilterRows, kFilterCols, false, [&](int64_t o, int64_t r) { return act.at(o, r); }, gin,
      threads);
  block_product(
      k, g.t(), x_rows, kFilterCols, kFilterRows, false, [&](int64_t o, int64_t r) { return act.at(r, o); }, gw,
      threads);
}

FilteredDst accumulate_into(const GemmMatrix& acc, uint8_t* written) {
  FilteredDst d;
  d.acc = acc;
  d.written = written;
  return d;
}
FilteredDst complete_into(const GemmMatrix& out) {
  FilteredDst d;
  d.out = out;
  return d;
}

}  // namespace

FlceRowResult flce_row_result(const FlceLossSpec& s, int64_t i, bool valid, float max, float sum_exp,
                              float z_target, float wz) {
  FlceRowResult r;
  if (!valid) return r;
  const double eps = s.eps, lambda = s.lambda, classes = double(std::max<int64_t>(s.classes, 1));
  const double log_s = std::log(double(sum_exp));
  const double lse = double(max) + log_s;
  const double wt = s.target_w ? double(s.target_w[i]) : 1.0;
  double ce = (1.0 - eps) * wt * (log_s - (double(z_target) - double(max)));
  if (eps > 0.0) ce += eps / classes * (s.class_w_total * lse - double(wz));
  r.ce = float(ce);
  r.zloss = float(lambda * lse * lse);
  const double sc = s.scale[i], zs = s.zscale ? double(s.zscale[i]) : 0.0;
  r.coef_p = float(sc * ((1.0 - eps) * wt + eps * s.class_w_total / classes) + zs * 2.0 * lambda * lse);
  r.coef_t = float(sc * (1.0 - eps) * wt);
  r.coef_u = float(sc * eps / classes);
  return r;
}

std::vector<float> flce_row_norms(const TensorView& m, Isa isa, int threads) {
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

bool flce_gemmable(const TensorView& m) {
  return m.rank() == 2 && core::gemm_layout_ok(m.shape[0], m.shape[1], m.strides[0], m.strides[1]);
}

void flce_fill_zero(const TensorView& t) {
  const int64_t n = t.numel(), es = dtype_size(t.dtype);
  if (n == 0) return;
  std::vector<int64_t> idx(t.rank(), 0);
  char* base = static_cast<char*>(t.data);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int d = 0; d < t.rank(); ++d) off += idx[d] * t.strides[d];
    std::memset(base + off * es, 0, es);
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
}

void flce_forward_run(const FlceForwardTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* local_target, const Vec1& max_out, const Vec1& sum_out, const Vec1& pred_out,
                      const TensorView* logits_out, void* workspace, const FlceFeatures* f) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < t.bt; ++i) {
    max_out.set_f32(i, ninf);
    sum_out.set_f32(i, 0.0f);
    pred_out.set_f32(i, 0.0f);
  }
  if (t.bt == 0 || t.v == 0) return;
  const FlceKernels* k = flce_kernels(t.isa);
  const GemmMatrix x = operand(input, t.input_copy_bytes ? at(workspace, t.input_copy_offset) : nullptr, t.threads);
  const GemmMatrix w =
      operand(weight, t.weight_copy_bytes ? at(workspace, t.weight_copy_offset) : nullptr, t.threads);
  float* logits = reinterpret_cast<float*>(at(workspace, t.logits_offset));
  for (int64_t b0 = 0; b0 < t.bt; b0 += t.bt_chunk) {
    const int64_t bc = std::min(t.bt_chunk, t.bt - b0);
    for (int64_t v0 = 0; v0 < t.v; v0 += t.v_chunk) {
      const int64_t vc = std::min(t.v_chunk, t.v - v0);
      const GemmMatrix l = GemmMatrix::rowmajor(logits, DType::kFloat32, bc, vc, vc);
      core::gemm(x.row_block(b0, bc), w.row_block(v0, vc).t(), l, false, t.threads);
      for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t i = b0 + r;
          float* row = logits + r * vc;
          if (f && (f->bias || f->softcap != 0.0f)) k->transform_row(row, vc, f->bias ? f->bias + v0 : nullptr, f->softcap);
          float m = max_out.f32(i), s = sum_out.f32(i);
          const float m_old = m;
          k->online_max_sum(row, vc, &m, &s);
          max_out.set_f32(i, m);
          sum_out.set_f32(i, s);
          if (f && f->bound && f->bound->row_exp_norm_sum) {
            float& a = f->bound->row_exp_norm_sum[i];  // rescaled to the new max, as the sum of exp
            a = (a == 0.0f ? 0.0f : a * std::exp(m_old - m)) +
                k->exp_weighted_sum(row, vc, m, f->bound->weight_norms + v0);
          }
          if (f && f->row_wsum) f->row_wsum[i] += k->weighted_sum(row, f->class_w ? f->class_w + v0 : nullptr, vc);
          const int64_t c = local_target[i] - v0;
          if (local_target[i] >= 0 && c >= 0 && c < vc) pred_out.set_f32(i, row[c]);
          if (logits_out) {
            const int64_t es = dtype_size(logits_out->dtype);
            char* dst = static_cast<char*>(logits_out->data) +
                        (i * logits_out->strides[0] + v0 * logits_out->strides[1]) * es;
            k->cast_row(row, vc, logits_out->dtype, dst, logits_out->strides[1]);
          }
        }
      });
    }
  }
  for (int64_t i = 0; i < t.bt; ++i)
    pred_out.set_f32(i, local_target[i] >= 0 ? pred_out.f32(i) - max_out.f32(i) : 0.0f);
}

void flce_grad_run(const FlceGradTiling& t, const TensorView& input, const TensorView& weight,
                   const TensorView* softmax, const float* row_grad, const float* row_max, const float* row_sum,
                   const int64_t* row_target, const TensorView& grad_input, const TensorView& grad_weight,
                   void* workspace, const FlceFeatures* f) {
  if (t.bt == 0 || t.v == 0 || t.h == 0) {
    flce_fill_zero(grad_input);
    flce_fill_zero(grad_weight);
    return;
  }
  const FlceKernels* k = flce_kernels(t.isa);
  const DType dt = input.dtype;
  const int64_t es = dtype_size(dt);
  const int64_t h = t.h;
  const GemmMatrix x = operand(input, t.input_copy_bytes ? at(workspace, t.input_copy_offset) : nullptr, t.threads);
  const GemmMatrix w =
      operand(weight, t.weight_copy_bytes ? at(workspace, t.weight_copy_offset) : nullptr, t.threads);
  float* logits = t.recompute ? reinterpret_cast<float*>(at(workspace, t.logits_offset)) : nullptr;
  char* g = at(workspace, t.g_offset);
  float* acc_in = reinterpret_cast<float*>(at(workspace, t.acc_input_offset));
  float* acc_w = reinterpret_cast<float*>(at(workspace, t.acc_weight_offset));
  const GemmMatrix gin = matrix_of(grad_input), gw = matrix_of(grad_weight);
  const bool filter = f && (f->filter_eps > 0.0f || f->bound);
  std::vector<uint8_t> gin_written(filter ? t.acc_input_rows : 0, 0), gw_written(filter ? t.acc_weight_rows : 0, 0);
  // An fp32 accumulator's rows, rounded into out rows [r0, r0 + rows) (filtering: unreached rows are 0).
  const auto flush = [&](const float* acc, std::vector<uint8_t>& written, const TensorView& out, int64_t r0,
                         int64_t rows) {
    if (filter)
      zero_unwritten_rows(k, GemmMatrix::rowmajor(acc, DType::kFloat32, rows, h, h), written.data());
    cast_rows(k, acc, out, r0, rows, t.threads);
  };

  const auto block = [&](int64_t b0, int64_t bc, int64_t v0, int64_t vc, int64_t bi, int64_t vi) {
    if (t.recompute)
      core::gemm(x.row_block(b0, bc), w.row_block(v0, vc).t(),
                 GemmMatrix::rowmajor(logits, DType::kFloat32, bc, vc, vc), false, t.threads);
    for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = b0 + r;
        FlceGradRow row;
        if (t.recompute) {
          float* lrow = logits + r * vc;
          if (f && (f->bias || f->softcap != 0.0f))
            k->transform_row(lrow, vc, f->bias ? f->bias + v0 : nullptr, f->softcap);
          row.src = lrow;
          row.src_stride = 1;
          row.from_logits = true;
          row.max = row_max[i];
          row.sum_exp = row_sum[i];
        } else {
          row.src = static_cast<const float*>(softmax->data) + i * softmax->strides[0] + v0 * softmax->strides[1];
          row.src_stride = softmax->strides[1];
        }
        row.n = vc;
        row.grad = row_grad[i];
        row.target_coef = row_grad[i];
        if (f && t.recompute) {
          if (f->row_target_coef) row.target_coef = f->row_target_coef[i];
          if (f->row_uniform_coef) row.uniform_coef = f->row_uniform_coef[i];
          row.softcap = f->softcap;
          row.class_w = f->class_w ? f->class_w + v0 : nullptr;
        }
        const int64_t c = row_target[i] - v0;
        row.target = (row_target[i] >= 0 && c >= 0 && c < vc) ? c : -1;
        row.out_dtype = dt;
        row.out = g + r * vc * es;
        k->grad_row(row);
      }
    });
    if (f && f->grad_bias_acc) accumulate_columns(k, f->grad_bias_acc + v0, g, dt, bc, vc, t.threads);
    const GemmMatrix gm = GemmMatrix::rowmajor(g, dt, bc, vc, vc);
    if (filter) {
      const int64_t ai = t.v_outer ? b0 : 0, aw = t.v_outer ? 0 : v0;
      filtered_gradients(
          k, gm, b0, v0, row_grad + b0, x.row_block(b0, bc), w.row_block(v0, vc), *f,
          t.grad_input_direct ? complete_into(gin.row_block(b0, bc))
                              : accumulate_into(GemmMatrix::rowmajor(acc_in + ai * h, DType::kFloat32, bc, h, h),
                                                gin_written.data() + ai),
          t.grad_weight_direct ? complete_into(gw.row_block(v0, vc))
                               : accumulate_into(GemmMatrix::rowmajor(acc_w + aw * h, DType::kFloat32, vc, h, h),
                                                 gw_written.data() + aw),
          t.threads);
      return;
    }
    // grad_input rows [b0, b0 + bc) (+)= G @ W[v0 : v0 + vc]
    if (t.grad_input_direct) {
      core::gemm(gm, w.row_block(v0, vc), gin.row_block(b0, bc), false, t.threads);
    } else {
      float* dst = acc_in + (t.v_outer ? b0 : 0) * h;
      core::gemm(gm, w.row_block(v0, vc), GemmMatrix::rowmajor(dst, DType::kFloat32, bc, h, h), vi > 0, t.threads);
    }
    // grad_weight rows [v0, v0 + vc) (+)= G^T @ X[b0 : b0 + bc]
    if (t.grad_weight_direct) {
      core::gemm(gm.t(), x.row_block(b0, bc), gw.row_block(v0, vc), false, t.threads);
    } else {
      float* dst = acc_w + (t.v_outer ? 0 : v0) * h;
      core::gemm(gm.t(), x.row_block(b0, bc), GemmMatrix::rowmajor(dst, DType::kFloat32, vc, h, h), bi > 0,
                 t.threads);
    }
  };

  if (t.v_outer) {
    for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk) {
      const int64_t vc = std::min(t.v_chunk, t.v - v0);
      for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk)
        block(b0, std::min(t.bt_chunk, t.bt - b0), v0, vc, bi, vi);
      if (!t.grad_weight_direct) flush(acc_w, gw_written, grad_weight, v0, vc);
    }
    if (!t.grad_input_direct) flush(acc_in, gin_written, grad_input, 0, t.bt);
  } else {
    for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk) {
      const int64_t bc = std::min(t.bt_chunk, t.bt - b0);
      for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk)
        block(b0, bc, v0, std::min(t.v_chunk, t.v - v0), bi, vi);
      if (!t.grad_input_direct) flush(acc_in, gin_written, grad_input, b0, bc);
    }
    if (!t.grad_weight_direct) flush(acc_w, gw_written, grad_weight, 0, t.v);
  }
}

void flce_chunked_run(const FlceFusedTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* target, const FlceLossSpec& spec, const FlceFeatures& f, float* row_ce,
                      float* row_zloss, const TensorView& grad_input, const TensorView& grad_weight, void* workspace) {
  const int64_t v = t.v, h = t.h;
  const FlceKernels* k = flce_kernels(t.isa);
  const DType dt = input.dtype;
  const int64_t es = dtype_size(dt);
  // An absent gradient (undefined dtype) is not computed.
  const bool want_gin = core::present(grad_input), want_gw = core::present(grad_weight);
  const GemmMatrix x = matrix_of(input), w = matrix_of(weight);
  const GemmMatrix gin = want_gin ? matrix_of(grad_input) : GemmMatrix();
  const GemmMatrix gw = want_gw ? matrix_of(grad_weight) : GemmMatrix();
  float* logits = reinterpret_cast<float*>(at(workspace, t.logits_offset));
  // fp32: G overwrites the logits row by row; 16-bit: its own dense buffer (no repacking pass).
  char* g = t.g_bytes ? at(workspace, t.g_offset) : reinterpret_cast<char*>(logits);
  float* acc_w = t.acc_weight_bytes ? reinterpret_cast<float*>(at(workspace, t.acc_weight_offset)) : nullptr;
  const bool transform = f.bias || f.softcap != 0.0f;
  const float ninf = -std::numeric_limits<float>::infinity();
  const bool filter = f.filter_eps > 0.0f || f.bound;
  // grad_weight sums over the chunks in fp32: the accumulator (16-bit weights), else the fp32 output
  // itself. (Filtering, 16-bit, whole plan: no accumulator, the one chunk completes it.)
  const GemmMatrix gw_acc = acc_w ? GemmMatrix::rowmajor(acc_w, DType::kFloat32, v, h, h) : gw;
  const bool gw_sums = acc_w || dt == DType::kFloat32;
  std::vector<uint8_t> gw_written(filter ? v : 0, 0);
  std::vector<float> row_coef(filter ? t.chunk_rows : 0);  // the chunk's softmax coefficients
  for (int64_t ci = 0, b0 = 0; b0 < t.bt; ++ci, b0 += t.chunk_rows) {
    const int64_t bc = std::min(t.chunk_rows, t.bt - b0);
    core::gemm(x.row_block(b0, bc), w.t(), GemmMatrix::rowmajor(logits, DType::kFloat32, bc, v, v), false,
               t.threads);
    for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = b0 + r;
        float* row = logits + r * v;
        if (transform) k->transform_row(row, v, f.bias, f.softcap);
        float m = ninf, s = 0.0f;
        k->online_max_sum(row, v, &m, &s);
        const int64_t tc = target[i];
        const float wz = spec.eps > 0.0f ? k->weighted_sum(row, f.class_w, v) : 0.0f;
        const FlceRowResult res = flce_row_result(spec, i, tc >= 0, m, s, tc >= 0 ? row[tc] : 0.0f, wz);
        row_ce[i] = res.ce;
        row_zloss[i] = res.zloss;
        if (filter) row_coef[r] = res.coef_p;
        FlceGradRow gr;
        gr.src = row;
        gr.n = v;
        gr.from_logits = true;
        gr.max = m;
        gr.sum_exp = s;
        gr.grad = res.coef_p;
        gr.target_coef = res.coef_t;
        gr.uniform_coef = res.coef_u;
        gr.softcap = f.softcap;
        gr.class_w = f.class_w;
        gr.target = tc;
        gr.out_dtype = dt;
        gr.out = g + r * v * es;
        k->grad_row(gr);
      }
    });
    if (f.grad_bias_acc) accumulate_columns(k, f.grad_bias_acc, g, dt, bc, v, t.threads);
    const GemmMatrix gm = GemmMatrix::rowmajor(g, dt, bc, v, v);
    if (filter) {
      const FilteredDst gin_dst = want_gin ? complete_into(gin.row_block(b0, bc)) : FilteredDst();
      const FilteredDst gw_dst = !want_gw ? FilteredDst()
                                 : gw_sums ? accumulate_into(gw_acc, gw_written.data())
                                           : complete_into(gw);
      filtered_gradients(k, gm, b0, 0, row_coef.data(), x.row_block(b0, bc), w, f, gin_dst, gw_dst, t.threads);
      continue;
    }
    if (want_gin) core::gemm(gm, w, gin.row_block(b0, bc), false, t.threads);
    if (want_gw) core::gemm(gm.t(), x.row_block(b0, bc), gw_acc, ci > 0, t.threads);
  }
  if (filter && gw_sums && want_gw) zero_unwritten_rows(k, gw_acc, gw_written.data());
  if (acc_w && want_gw) cast_rows(k, acc_w, grad_weight, 0, v, t.threads);
}

}  // namespace tilegrad::ops
