// Flash attention block kernels (fp32 blocks, raw pointers, no allocation), one copy per ISA.
// A block is `rows` x `cols` floats with leading dimension ld; row r keeps columns [lo[r], hi[r])
// (0 <= lo, hi <= cols; empty when lo >= hi), columns outside it count as masked. An explicit mask
// has already written -inf into S where it masks.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct FlashAttentionKernels {
  // Online softmax step on S (already scaled): m' = max(m, rowmax(S)), S <- exp(S - m') (P, 0 where
  // masked), sum <- sum * exp(m - m') + rowsum(P), out row <- out row * exp(m - m'), m <- m'.
  // A row with nothing kept so far (m' = -inf) gets P = 0 and keeps m = -inf, sum, out.
  void (*online_softmax)(float* s, int64_t ld, int64_t rows, int64_t cols, const int64_t* lo, const int64_t* hi,
                         float* row_max, float* row_sum, float* out, int64_t ld_out, int64_t out_cols);
  // Softmax backward on S (scaled) and dP: P = exp(S - max) * inv_sum where kept, else 0;
  // S <- P, dP <- P * (dP - rowdot).
  void (*softmax_grad)(float* s, float* dp, int64_t ld, int64_t rows, int64_t cols, const int64_t* lo,
                       const int64_t* hi, const float* row_max, const float* inv_sum, const float* rowdot);
  // dst[0..n) = float(src) * scale (src contiguous, dtype d).
  void (*widen)(DType d, const char* src, float* dst, int64_t n, float scale);
  // dst[0..n) = round(src * scale) (dst contiguous, dtype d).
  void (*narrow)(DType d, const float* src, char* dst, int64_t n, float scale);
  // sum_i a[i] * b[i].
  float (*dot)(const float* a, const float* b, int64_t n);
};

FlashAttentionKernels flash_attention_kernels_scalar();
FlashAttentionKernels flash_attention_kernels_avx2();
FlashAttentionKernels flash_attention_kernels_avx512();

inline FlashAttentionKernels flash_attention_kernels(Isa isa) {
  using Get = FlashAttentionKernels (*)();
  return core::KernelTable<Get>{flash_attention_kernels_scalar, flash_attention_kernels_avx2,
                                flash_attention_kernels_avx512}
      .pick(isa)();
}

}  // namespace tilegrad::ops
