// aclnnSwiGluGrad span kernel: n contiguous elements per operand, one dtype for all.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// ptrs = {da, db, dy, a, b}: da = dy * b * s * (1 + a * (1 - s)), db = dy * (s * a), s = sigmoid(a).
using SwiGluGradSpanFn = void (*)(DType dtype, char* const* ptrs, int64_t n, bool streaming_stores);

void swi_glu_grad_span_scalar(DType, char* const*, int64_t, bool);
void swi_glu_grad_span_avx2(DType, char* const*, int64_t, bool);
void swi_glu_grad_span_avx512(DType, char* const*, int64_t, bool);

inline SwiGluGradSpanFn swi_glu_grad_kernel(Isa isa) {
  return core::KernelTable<SwiGluGradSpanFn>{swi_glu_grad_span_scalar, swi_glu_grad_span_avx2,
                                             swi_glu_grad_span_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
