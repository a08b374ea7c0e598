// aclnnRmsNormGrad kernel: a sweep of dense rows per call (core/row_sweep.h; one row when rows are
// gathered), dy / x / dx in one dtype, gamma pre-widened to fp32, the rows' dgamma contributions
// accumulated into their block's fp32 partial in row order.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/row_sweep.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// Per row: xhat = x * rstd; dx = (dy * g - xhat * mean) * rstd with mean = sum(dy * g * xhat) * inv_n;
// then per column j, over the rows in order: dgamma_partial[j] += dy_j * xhat_j. A row's `extra`
// (nullptr or a row of dy's dtype: the residual gradient of AddRmsNorm's fused backward) is added to
// dx in fp32 before its one rounding. `stream`: non-temporal stores for dx rows that are 64-byte
// aligned.
using RmsNormGradSweepFn = void (*)(DType dtype, const core::RowSweep& rows, const float* gamma,
                                    float* dgamma_partial, int64_t n, float inv_n, bool stream);

void rms_norm_grad_sweep_scalar(DType, const core::RowSweep&, const float*, float*, int64_t, float, bool);
void rms_norm_grad_sweep_avx2(DType, const core::RowSweep&, const float*, float*, int64_t, float, bool);
void rms_norm_grad_sweep_avx512(DType, const core::RowSweep&, const float*, float*, int64_t, float, bool);

inline RmsNormGradSweepFn rms_norm_grad_kernel(Isa isa) {
  return core::KernelTable<RmsNormGradSweepFn>{rms_norm_grad_sweep_scalar, rms_norm_grad_sweep_avx2,
                                               rms_norm_grad_sweep_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
