// aclnnAddRmsNorm row kernel: one dense row per call, x1 / x2 / xOut / y in one dtype, gamma
// pre-widened to fp32.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// x_out = round(x1 + x2); y = round((float(x_out) * rstd) * gamma), rstd = 1 / sqrt(sum(x_out^2) *
// inv_n + eps); returns rstd. x_out may be x1 or x2 itself, y may be x1 or x2 itself (both read
// before either is written, element by element). `stream`: non-temporal stores for y when y is
// 64-byte aligned (x_out is re-read, so never streamed).
using AddRmsNormRowFn = float (*)(DType dtype, const char* x1, const char* x2, const float* gamma, char* x_out,
                                  char* y, int64_t n, float eps, float inv_n, bool stream);

float add_rms_norm_row_scalar(DType, const char*, const char*, const float*, char*, char*, int64_t, float, float, bool);
float add_rms_norm_row_avx2(DType, const char*, const char*, const float*, char*, char*, int64_t, float, float, bool);
float add_rms_norm_row_avx512(DType, const char*, const char*, const float*, char*, char*, int64_t, float, float,
                              bool);

inline AddRmsNormRowFn add_rms_norm_kernel(Isa isa) {
  return core::KernelTable<AddRmsNormRowFn>{add_rms_norm_row_scalar, add_rms_norm_row_avx2, add_rms_norm_row_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
