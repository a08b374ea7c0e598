// aclnnLayerNorm row kernel: one dense row per call, x / y in one dtype, weight and bias pre-widened
// to fp32 (ones / zeros when absent).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// mean = sum(x) * inv_n, rstd = 1 / sqrt(sum((x - mean)^2) * inv_n + eps),
// y[0..n) = round(fma((x - mean) * rstd, w, b)); stats[0] = mean, stats[1] = rstd.
// `stream`: non-temporal stores for y when y is 64-byte aligned.
using LayerNormRowFn = void (*)(DType dtype, const char* x, const float* w, const float* b, char* y, int64_t n,
                                float eps, float inv_n, bool stream, float* stats);

void layer_norm_row_scalar(DType, const char*, const float*, const float*, char*, int64_t, float, float, bool, float*);
void layer_norm_row_avx2(DType, const char*, const float*, const float*, char*, int64_t, float, float, bool, float*);
void layer_norm_row_avx512(DType, const char*, const float*, const float*, char*, int64_t, float, float, bool, float*);

inline LayerNormRowFn layer_norm_kernel(Isa isa) {
  return core::KernelTable<LayerNormRowFn>{layer_norm_row_scalar, layer_norm_row_avx2, layer_norm_row_avx512}.pick(isa);
}

}  // namespace tilegrad::ops
