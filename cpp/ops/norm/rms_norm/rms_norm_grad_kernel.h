// aclnnRmsNormGrad row kernel: one dense row per call, dy / x / dx in one dtype, gamma pre-widened
// to fp32, the row's dgamma contribution accumulated into its block's fp32 partial.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// xhat = x * rstd; dx = (dy * g - xhat * mean) * rstd with mean = sum(dy * g * xhat) * inv_n;
// dgamma_partial[j] += dy_j * xhat_j. dresidual (nullptr or a row of dy's dtype) is added to dx in
// fp32 before its one rounding: AddRmsNorm's fused backward. `stream`: non-temporal stores for dx
// when 64-byte aligned.
using RmsNormGradRowFn = void (*)(DType dtype, const char* dy, const char* x, const float* gamma, float rstd,
                                  const char* dresidual, char* dx, float* dgamma_partial, int64_t n, float inv_n,
                                  bool stream);

void rms_norm_grad_row_scalar(DType, const char*, const char*, const float*, float, const char*, char*, float*,
                              int64_t, float, bool);
void rms_norm_grad_row_avx2(DType, const char*, const char*, const float*, float, const char*, char*, float*,
                            int64_t, float, bool);
void rms_norm_grad_row_avx512(DType, const char*, const char*, const float*, float, const char*, char*, float*,
                              int64_t, float, bool);

inline RmsNormGradRowFn rms_norm_grad_kernel(Isa isa) {
  return core::KernelTable<RmsNormGradRowFn>{rms_norm_grad_row_scalar, rms_norm_grad_row_avx2,
                                             rms_norm_grad_row_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
