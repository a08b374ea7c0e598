// The unbounded filter's block selection (filter_eps) and the filtered gradient products of both
// filters (flce_filter.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/loss/fused_linear_cross_entropy/flce_blocks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_filter.h"

namespace tilegrad::ops {

using core::GemmMatrix;

namespace {

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

}  // namespace

void filtered_gradients(const FlceKernels* k, const FlceGBlock& block, const FlceFeatures& f, const FilteredDst& gin,
                        const FilteredDst& gw, int threads) {
  const GemmMatrix& g = block.g;
  if (f.bound) {
    const BoundedMasks m = bounded_masks(k, block, *f.bound, threads);
    if (f.filter_counts) {
      for (size_t b = 0; b < m.input.size(); ++b) f.filter_counts[0] += (m.input[b] | m.weight[b]) != 0;
      f.filter_counts[1] += int64_t(m.input.size());
    }
    block_product(
        k, g, block.w_rows, kFilterRows, kFilterCols, all_set(m.input),
        [&](int64_t o, int64_t r) { return m.input_at(o, r); }, gin, threads);
    block_product(
        k, g.t(), block.x_rows, kFilterCols, kFilterRows, all_set(m.weight),
        [&](int64_t o, int64_t r) { return m.weight_at(r, o); }, gw, threads);
    return;
  }
  const ActiveBlocks act = find_active_blocks(k, static_cast<const char*>(g.data), g.dtype, g.rows, g.cols,
                                              f.filter_eps, block.row_scale, threads);
  if (f.filter_counts) {
    f.filter_counts[0] += act.count();
    f.filter_counts[1] += int64_t(act.flags.size());
  }
  // (the unbounded filter keeps its per-block products even when every block is active)
  block_product(
      k, g, block.w_rows, kFilterRows, kFilterCols, false, [&](int64_t o, int64_t r) { return act.at(o, r); }, gin,
      threads);
  block_product(
      k, g.t(), block.x_rows, kFilterCols, kFilterRows, false, [&](int64_t o, int64_t r) { return act.at(r, o); },
      gw, threads);
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

void zero_unwritten_rows(const FlceKernels* k, const GemmMatrix& acc, uint8_t* written) {
  for (int64_t r = 0; r < acc.rows;) {
    int64_t r1 = r + 1;
    while (r1 < acc.rows && (written[r1] != 0) == (written[r] != 0)) ++r1;
    if (!written[r]) store_rows(k, nullptr, acc.row_block(r, r1 - r));
    r = r1;
  }
  std::memset(written, 0, acc.rows);
}

}  // namespace tilegrad::ops
