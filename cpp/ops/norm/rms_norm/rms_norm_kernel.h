// aclnnRmsNorm row kernel: one dense row per call, x / y in one dtype, gamma pre-widened to fp32.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// y[0..n) = round((float(x) * rstd) * gamma), rstd = 1 / sqrt(sum(float(x)^2) * inv_n + eps);
// returns rstd. `stream`: non-temporal stores for y when y is 64-byte aligned.
using RmsNormRowFn = float (*)(DType dtype, const char* x, const float* gamma, char* y, int64_t n, float eps,
                               float inv_n, bool stream);

float rms_norm_row_scalar(DType, const char*, const float*, char*, int64_t, float, float, bool);
float rms_norm_row_avx2(DType, const char*, const float*, char*, int64_t, float, float, bool);
float rms_norm_row_avx512(DType, const char*, const float*, char*, int64_t, float, float, bool);

inline RmsNormRowFn rms_norm_kernel(Isa isa) {
  return core::KernelTable<RmsNormRowFn>{rms_norm_row_scalar, rms_norm_row_avx2, rms_norm_row_avx512}.pick(isa);
}

}  // namespace tilegrad::ops
