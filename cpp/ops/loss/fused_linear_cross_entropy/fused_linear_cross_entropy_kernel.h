// Row kernels shared by the fused linear cross-entropy family (OnlineMaxSum, CrossEntropyLossWithMaxSum,
// LinearCrossEntropyLossGrad and the single-process fused op). GEMMs are not here: they go through
// oneDNN (core/gemm.h). Each kernel handles one row (or row chunk); strides are in elements.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// One row of the gradient block, rounded once to out_dtype:
//   g[j] = (grad * q[j] - target_coef * (j == target) - uniform_coef * cw[j]) * cap[j]
// with q = exp(src[j] - max) / sum_exp (from_logits) or q = src[j] (a given softmax), cw the class
// weights (1 when class_w is null), cap[j] = 1 - (src[j] / softcap)^2 with a softcap (src then holds
// the capped logits), else 1. The plain case (target_coef == grad, no uniform term, no softcap) is
// formed as (q - 1) * grad at the target, in fp32.
struct FlceGradRow {
  const float* src = nullptr;
  int64_t src_stride = 1;
  int64_t n = 0;
  bool from_logits = false;
  float max = 0.0f, sum_exp = 1.0f, grad = 0.0f;
  float target_coef = 0.0f, uniform_coef = 0.0f, softcap = 0.0f;  // general form (from_logits, stride 1)
  const float* class_w = nullptr;                                  // n contiguous fp32, or null
  int64_t target = -1;  // column inside this row chunk, or -1
  DType out_dtype = DType::kFloat32;
  void* out = nullptr;  // n contiguous elements; may be src itself (src_stride 1): written behind the reads
};

struct FlceKernels {
  // Online max / sum-exp over one chunk of fp32 logits (contiguous): *max and *sum_exp are the
  // running values of the row (start with -inf and 0). The chunk's own max is taken first, then
  // sum_exp = sum_exp * exp(max_old - max_new) + sum_j exp(l[j] - max_new).
  void (*online_max_sum)(const float* l, int64_t n, float* max, float* sum_exp);
  // dst[j] (dtype, stride ds) = src[j] (fp32 contiguous) rounded once.
  void (*cast_row)(const float* src, int64_t n, DType dtype, void* dst, int64_t ds);
  // out[j] (fp32, stride os) = exp(x[j] - max) / sum_exp, x of dtype (fp32/fp16/bf16) with stride xs.
  void (*softmax_row)(DType dtype, const void* x, int64_t xs, int64_t n, float max, float sum_exp, float* out,
                      int64_t os);
  void (*grad_row)(const FlceGradRow& row);
  // z[j] = softcap * tanh((z[j] + bias[j]) / softcap); bias null: no bias; softcap 0: no cap.
  void (*transform_row)(float* z, int64_t n, const float* bias, float softcap);
  // sum_j w[j] * z[j] (w null: sum_j z[j]), fp32, one fixed order.
  float (*weighted_sum)(const float* z, const float* w, int64_t n);
  // sum_j exp(l[j] - max) * w[j] over n contiguous fp32 logits, fp32, one fixed order.
  float (*exp_weighted_sum)(const float* l, int64_t n, float max, const float* w);
  // acc[j] += g[j] (g: n contiguous elements of dtype), fp32.
  void (*accumulate_row)(float* acc, const void* g, DType dtype, int64_t n);
  // Gradient filtering: flags[b] = 1 if some g[j] of column block b (columns [b * block, (b + 1) *
  // block) of the n contiguous elements of dtype) has |g[j]| >= eps or is NaN; other flags untouched.
  void (*mark_active)(const void* g, DType dtype, int64_t n, int64_t block, float eps, uint8_t* flags);
  // Bounded filtering, one G row (n contiguous elements of dtype): block_sums[b] = sum over column
  // block b of |g[j]| * col_norm[j], and col_acc[j] += |g[j]| * row_norm (fp32, one fixed order; a
  // NaN reaches both).
  void (*bound_sums)(const void* g, DType dtype, int64_t n, int64_t block, const float* col_norm, float row_norm,
                     float* block_sums, float* col_acc);
  // sum_j x[j]^2 over n contiguous elements of dtype, fp32, one fixed order.
  float (*sum_squares)(const void* x, DType dtype, int64_t n);
};

const FlceKernels* flce_kernels_scalar();
const FlceKernels* flce_kernels_avx2();
const FlceKernels* flce_kernels_avx512();

inline const FlceKernels* flce_kernels(Isa isa) {
  using Fn = const FlceKernels* (*)();
  return core::KernelTable<Fn>{flce_kernels_scalar, flce_kernels_avx2, flce_kernels_avx512}.pick(isa)();
}

}  // namespace tilegrad::ops
