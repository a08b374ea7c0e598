// aclnnLayerNormBackward row kernel: one dense row per call, dy / x / dx in one dtype, weight
// pre-widened to fp32 (ones when absent), the row's dweight / dbias contributions accumulated into
// its block's fp32 partials.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// xhat = (x - mean) * rstd, g = dy * w;
// dx = round(rstd * (g - mean_N(g) - xhat * mean_N(g * xhat)))   (dx nullptr: not computed);
// dw_partial[j] += dy_j * xhat_j, db_partial[j] += dy_j             (both nullptr: not computed).
// `stream`: non-temporal stores for dx when 64-byte aligned.
using LayerNormBackwardRowFn = void (*)(DType dtype, const char* dy, const char* x, const float* w, float mean,
                                        float rstd, char* dx, float* dw_partial, float* db_partial, int64_t n,
                                        float inv_n, bool stream);

void layer_norm_backward_row_scalar(DType, const char*, const char*, const float*, float, float, char*, float*, float*,
                                    int64_t, float, bool);
void layer_norm_backward_row_avx2(DType, const char*, const char*, const float*, float, float, char*, float*, float*,
                                  int64_t, float, bool);
void layer_norm_backward_row_avx512(DType, const char*, const char*, const float*, float, float, char*, float*, float*,
                                    int64_t, float, bool);

inline LayerNormBackwardRowFn layer_norm_backward_kernel(Isa isa) {
  return core::KernelTable<LayerNormBackwardRowFn>{layer_norm_backward_row_scalar, layer_norm_backward_row_avx2,
                                                   layer_norm_backward_row_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
