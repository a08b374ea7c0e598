// Fixed-order reductions: sums whose rounding never depends on the thread count. Shared by every
// operator that reduces over rows (RMSNorm's dgamma, RoPE's dcos / dsin, the optimizer's global
// gradient norm); one helper, not one per operator (DESIGN.md). The API below is stable: other
// operators build on it.
//
// 1. Column sums over rows (RowBlocks): out[c] = sum over r of v(r, c), for a (rows x cols) grid of
//    values an operator produces on the fly (dgamma_c = sum_r dy[r,c] * xhat[r,c]).
//
//      RowBlocks rb = plan_row_blocks(rows, cols);            // in the tiling: a pure function of the shape
//      workspace bytes += rb.workspace_bytes();               // the caller provides the partials
//      parallel_for(rb.num_blocks, threads, [&](int64_t b) {  // one tile per block, any thread
//        float* p = rb.partial(ws, b);                        // cols floats, zeroed by the caller's kernel
//        for (int64_t r = rb.begin(b); r < rb.end(b); ++r)    // rows in order, accumulated into p
//          for c: p[c] += v(r, c);
//      });
//      sum_row_block_partials(rb, ws, out, threads);          // block order; parallel over columns
//
//    The rows are cut into blocks of block_rows consecutive rows; block_rows depends only on
//    (rows, cols), never on the thread count, so which thread runs a block changes nothing. Each
//    block's partial is accumulated in fp32 in row order, and the partials are summed in block order
//    in double and rounded once to fp32.
//    Why fp32 partials: the vendor accumulates dgamma in fp32 too; the kernel accumulates straight
//    into the partial row with its SIMD fp32 lanes (no conversion in the row loop), and the
//    workspace and the final pass move half the bytes of double partials. The error of a partial
//    grows with block_rows, which is at most max(ceil(rows / kMaxBlocks), the workspace-cap bound);
//    the final sum over at most kMaxBlocks partials is in double, so it adds only the one rounding.
//
// 2. A scalar sum of squares over many spans (sum_squares): the global L2 norm of a list of
//    tensors (fp32 / fp16 / bf16, each a strided 1-D span). Each span is cut into fixed chunks of
//    kSquaresChunk elements; each chunk is summed in double (8 interleaved accumulators, combined
//    in a fixed order); the chunk sums are added in (span, chunk) order in double. Identical for
//    every thread count and every ISA (this code is compiled once, at the baseline ISA). Double,
//    because the result is one scalar over possibly 10^9 squares: its cost is nil and fp32 would
//    lose digits.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

// ---- 1. column sums over rows --------------------------------------------------------------

struct RowBlocks {
  static constexpr int64_t kMaxBlocks = 64;                      // parallel slack, final-pass length
  static constexpr int64_t kMinBlockElems = 16384;               // a block is worth a tile
  static constexpr int64_t kMaxWorkspaceBytes = int64_t{8} << 20;  // partials never exceed this

  int64_t rows = 0, cols = 0;
  int64_t block_rows = 1;  // rows per block (the last block may have fewer)
  int64_t num_blocks = 0;  // ceil(rows / block_rows); 0 when rows or cols is 0

  int64_t begin(int64_t b) const { return b * block_rows; }
  int64_t end(int64_t b) const { return b + 1 < num_blocks ? (b + 1) * block_rows : rows; }
  // fp32 partials: num_blocks rows of cols floats, each row starting on a 64-byte boundary
  // (partial_stride floats apart) so two blocks never share a cache line.
  int64_t partial_stride() const { return (cols + 15) / 16 * 16; }
  int64_t workspace_bytes() const { return num_blocks * partial_stride() * int64_t{sizeof(float)}; }
  float* partial(void* workspace, int64_t b) const { return static_cast<float*>(workspace) + b * partial_stride(); }
  const float* partial(const void* workspace, int64_t b) const {
    return static_cast<const float*>(workspace) + b * partial_stride();
  }
};

// The fixed partition of `rows` rows (each `cols` values) into blocks: a pure function of the shape.
TILEGRAD_API RowBlocks plan_row_blocks(int64_t rows, int64_t cols);

// out[c] = sum over b = 0..num_blocks-1, in that order, of partial(b)[c], accumulated in double
// and rounded once; out[c] = 0 when there are no blocks. Parallel over fixed column ranges on up to
// `threads` threads (results identical for every thread count). out may be strided (out_stride
// floats between columns). workspace must hold every block's partial.
TILEGRAD_API void sum_row_block_partials(const RowBlocks& rb, const void* workspace, float* out, int threads,
                                         int64_t out_stride = 1);

// The whole pattern on a plain fp32 matrix: out[c] = sum_r a[r * lda + c], blocked as above (the
// reference use of RowBlocks, and a column sum for callers that have the values in memory).
TILEGRAD_API void ordered_column_sum(const float* a, int64_t rows, int64_t cols, int64_t lda, float* out,
                                     void* workspace, int threads);

// ---- 2. sum of squares over many spans -----------------------------------------------------

struct FloatSpan {
  const void* data = nullptr;  // first element
  int64_t n = 0;               // elements
  int64_t stride = 1;          // in elements (any sign)
  DType dtype = DType::kFloat32;  // float32, float16 or bfloat16
};

constexpr int64_t kSquaresChunk = 16384;

// Workspace sum_squares needs for these spans: one double per chunk plus the chunk offsets.
TILEGRAD_API int64_t sum_squares_workspace_bytes(const FloatSpan* spans, int64_t count);

// sum over spans, in order, of sum_i float(x_i)^2, in double (see the header comment for the
// order). NaN / inf propagate. workspace: sum_squares_workspace_bytes(spans, count) bytes,
// 8-byte aligned.
TILEGRAD_API double sum_squares(const FloatSpan* spans, int64_t count, void* workspace, int threads);

}  // namespace tilegrad::core
