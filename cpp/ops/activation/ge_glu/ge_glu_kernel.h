// GeGLU span kernels (aclnnGeGluV3 and its backward): n contiguous elements per operand, one dtype for
// all; the halves are passed as the activated one (h) and the linear one (l), whichever side
// activateLeft picks, so the kernels never see the direction. The gelu form is fixed per launch.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// Forward: ptrs = {out, outGelu, h, l}: outGelu = gelu(h), out = gelu(h) * l.
// Backward: ptrs = {dh, dl, dy, h, l, gelu}: dh = dy * l * gelu'(h), dl = dy * gelu.
// gelu_mul (the two-tensor form, gate activated): forward ptrs = {out, gate, up}: out = gelu(gate) * up;
// backward ptrs = {d_gate, d_up, dy, gate, up}: d_gate = dy * up * gelu'(gate), d_up = dy * gelu(gate).
using GeGluSpanFn = void (*)(DType dtype, bool tanh, char* const* ptrs, int64_t n, bool streaming_stores);

void ge_glu_span_scalar(DType, bool, char* const*, int64_t, bool);
void ge_glu_span_avx2(DType, bool, char* const*, int64_t, bool);
void ge_glu_span_avx512(DType, bool, char* const*, int64_t, bool);
void ge_glu_backward_span_scalar(DType, bool, char* const*, int64_t, bool);
void ge_glu_backward_span_avx2(DType, bool, char* const*, int64_t, bool);
void ge_glu_backward_span_avx512(DType, bool, char* const*, int64_t, bool);
void gelu_mul_span_scalar(DType, bool, char* const*, int64_t, bool);
void gelu_mul_span_avx2(DType, bool, char* const*, int64_t, bool);
void gelu_mul_span_avx512(DType, bool, char* const*, int64_t, bool);
void gelu_mul_backward_span_scalar(DType, bool, char* const*, int64_t, bool);
void gelu_mul_backward_span_avx2(DType, bool, char* const*, int64_t, bool);
void gelu_mul_backward_span_avx512(DType, bool, char* const*, int64_t, bool);

inline GeGluSpanFn ge_glu_kernel(Isa isa) {
  return core::KernelTable<GeGluSpanFn>{ge_glu_span_scalar, ge_glu_span_avx2, ge_glu_span_avx512}.pick(isa);
}

inline GeGluSpanFn ge_glu_backward_kernel(Isa isa) {
  return core::KernelTable<GeGluSpanFn>{ge_glu_backward_span_scalar, ge_glu_backward_span_avx2,
                                        ge_glu_backward_span_avx512}
      .pick(isa);
}

inline GeGluSpanFn gelu_mul_kernel(Isa isa) {
  return core::KernelTable<GeGluSpanFn>{gelu_mul_span_scalar, gelu_mul_span_avx2, gelu_mul_span_avx512}.pick(isa);
}

inline GeGluSpanFn gelu_mul_backward_kernel(Isa isa) {
  return core::KernelTable<GeGluSpanFn>{gelu_mul_backward_span_scalar, gelu_mul_backward_span_avx2,
                                        gelu_mul_backward_span_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
