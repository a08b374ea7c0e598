// GEMM through oneDNN's matmul primitive: C (M x N) = A (M x K) @ B (K x N) [+ C], fp32
// accumulation, A and B fp32/fp16/bf16 (same dtype), C fp32 or the inputs' dtype. Operands are
// strided matrices (a transposed operand is just swapped strides). Primitives are cached per
// shape/strides/dtypes/threads; every function here is thread-safe. Never call gemm() from inside an
// OpenMP parallel region of ours: oneDNN runs its own parallel region on the calling thread.
#pragma once

#include <cstdint>
#include <string>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

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
};

// True if oneDNN's optimized matmul takes this layout directly: one unit stride and the other
// stride covering that dimension (plain row- or column-major with a leading dimension).
bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// c = a @ b (accumulate: c += a @ b), fp32 accumulation, c rounded once. a.cols == b.rows, etc.
// K == 0 gives c = 0 (or leaves c unchanged when accumulating). Runs on `threads` threads.
TILEGRAD_API void gemm(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate, int threads);

// oneDNN's implementation name for this problem (e.g. "brg:avx512_core_bf16"), for benchmarks.
// (gemm and gemm_implementation are exported only for the benchmark hook tilegrad._core._onednn_matmul.)
TILEGRAD_API std::string gemm_implementation(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate,
                                int threads);

}  // namespace tilegrad::core
