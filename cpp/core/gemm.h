// GEMM through oneDNN's matmul primitive: C (M x N) = A (M x K) @ B (K x N) [+ C], fp32
// accumulation, A and B fp32/fp16/bf16 (same dtype), C fp32 or the inputs' dtype. Operands are
// strided matrices (a transposed operand is just swapped strides). Primitives are cached per
// shape/strides/dtypes/threads; every function here is thread-safe.
//
// Determinism: oneDNN chooses its own parallel decomposition from the thread count (it may split
// the K loop across threads and add the partial sums in a thread-dependent order). gemm() therefore
// splits C itself into blocks that depend on (M, N, K) only and runs each block as one
// single-threaded oneDNN call with its whole K loop, the blocks spread over our threads: the result
// is bit-identical for every thread count. A block whose C is a column block of a wider C (leading
// dimension > its columns) runs into a dense per-thread buffer (row slices of at most 4 MiB): oneDNN's
// brgemm matmul declines such a C and its gemm:jit fallback mallocs packing buffers on every call.
// gemm_plain() is oneDNN's own multi-threaded call (the benchmarks' ceiling); it must not be used by
// operators.
#pragma once

#include <cstdint>
#include <string>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

class Trace;

// Element (r, c) lives at data + (r * row_stride + c * col_stride) * dtype_size(dtype).
struct GemmMatrix {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 1;

  GemmMatrix() = default;
  GemmMatrix(const void* d, DType dt, int64_t r, int64_t c, int64_t rs, int64_t cs)
      : data(const_cast<void*>(d)), dtype(dt), rows(r), cols(c), row_stride(rs), col_stride(cs) {}
  // Row-major r x c with leading dimension ld.
  static GemmMatrix rowmajor(const void* d, DType dt, int64_t r, int64_t c, int64_t ld) {
    return GemmMatrix(d, dt, r, c, ld, 1);
  }
  GemmMatrix t() const { return GemmMatrix(data, dtype, cols, rows, col_stride, row_stride); }
  // Rows [r0, r0 + n) of this matrix.
  GemmMatrix row_block(int64_t r0, int64_t n) const {
    return GemmMatrix(static_cast<char*>(data) + r0 * row_stride * dtype_size(dtype), dtype, n, cols, row_stride,
                      col_stride);
  }
  // Columns [c0, c0 + n) of this matrix.
  GemmMatrix col_block(int64_t c0, int64_t n) const {
    return GemmMatrix(static_cast<char*>(data) + c0 * col_stride * dtype_size(dtype), dtype, rows, n, row_stride,
                      col_stride);
  }
};

// True if oneDNN's optimized matmul takes this layout directly: one unit stride and the other
// stride covering that dimension (plain row- or column-major with a leading dimension).
bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// The thread-count-independent split of an M x N x K product: a grid of block_rows x block_cols
// blocks of C (edge blocks smaller).
struct GemmBlocks {
  int64_t block_rows, block_cols, grid_rows, grid_cols;
};
constexpr double kGemmBlockWork = double(1 << 24);  // multiply-adds per block, about
constexpr int64_t kGemmMaxBlocks = 24;
constexpr int64_t kGemmMinBlock = 64;
TILEGRAD_API GemmBlocks gemm_blocks(int64_t m, int64_t n, int64_t k);

// c = a @ b (accumulate: c += a @ b), fp32 accumulation, c rounded once. a.cols == b.rows, etc.
// K == 0 gives c = 0 (or leaves c unchanged when accumulating). Runs on `threads` threads with a
// result independent of `threads` (see above). May be called inside a parallel region of ours
// (then it runs on the calling thread only).
TILEGRAD_API void gemm(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate, int threads);

// One oneDNN call on `threads` threads: oneDNN's own decomposition, results may depend on
// `threads`. For benchmarks (the plain-matmul ceiling) only. Never inside a parallel region of ours.
TILEGRAD_API void gemm_plain(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate,
                             int threads);

// oneDNN's implementation name for this problem (e.g. "brg:avx512_core_bf16"), for benchmarks.
// (gemm and gemm_implementation are exported only for the benchmark hook tilegrad._core._onednn_matmul.)
TILEGRAD_API std::string gemm_implementation(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate,
                                int threads);

// Adds to a recorded TILEGRAD_VERBOSE line (core/trace.h) how the GEMMs of `dtype` operands run:
// onednn_isa, oneDNN's instruction set (the CPU's best, capped by ONEDNN_MAX_CPU_ISA, which oneDNN
// reads once, at its first use), e.g. avx512_core_bf16; for fp16, f16_gemm=native or widened_to_f32
// (oneDNN has no fp16 matmul for this CPU). Nothing when the trace is off.
void trace_gemm(Trace& trace, DType dtype);
// oneDNN's instruction set as onednn_isa shows it (also for `python -m tilegrad`).
TILEGRAD_API const char* onednn_isa();

}  // namespace tilegrad::core
