// aclnnLayerNormBackward kernel: a sweep of dense rows per call (core/row_sweep.h; one row when rows
// are gathered), dy / x / dx in one dtype, weight pre-widened to fp32 (ones when absent), the rows'
// dweight / dbias contributions accumulated into their block's fp32 partials in row order.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/row_sweep.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// Per row: xhat = (x - mean) * rstd, g = dy * w;
//   dx = round(rstd * (g - mean_N(g) - xhat * mean_N(g * xhat)));
// then per column j, over the rows in order (both partials nullptr: not computed):
//   dw_partial[j] += dy_j * xhat_j, db_partial[j] += dy_j.
// `stream`: non-temporal stores for dx rows that are 64-byte aligned.
using LayerNormBackwardSweepFn = void (*)(DType dtype, const core::RowSweep& rows, const float* w,
                                          float* dw_partial, float* db_partial, int64_t n, float inv_n, bool stream);

void layer_norm_backward_sweep_scalar(DType, const core::RowSweep&, const float*, float*, float*, int64_t,
                                      float, bool);
void layer_norm_backward_sweep_avx2(DType, const core::RowSweep&, const float*, float*, float*, int64_t,
                                    float, bool);
void layer_norm_backward_sweep_avx512(DType, const core::RowSweep&, const float*, float*, float*, int64_t,
                                      float, bool);

inline LayerNormBackwardSweepFn layer_norm_backward_kernel(Isa isa) {
  return core::KernelTable<LayerNormBackwardSweepFn>{layer_norm_backward_sweep_scalar,
                                                     layer_norm_backward_sweep_avx2,
                                                     layer_norm_backward_sweep_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
