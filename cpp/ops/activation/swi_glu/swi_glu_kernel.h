// aclnnSwiGlu span kernel: n contiguous elements per operand, one dtype for all.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// ptrs = {out, a, b}: out = silu(a) * b.
using SwiGluSpanFn = void (*)(DType dtype, char* const* ptrs, int64_t n, bool streaming_stores);

void swi_glu_span_scalar(DType, char* const*, int64_t, bool);
void swi_glu_span_avx2(DType, char* const*, int64_t, bool);
void swi_glu_span_avx512(DType, char* const*, int64_t, bool);

inline SwiGluSpanFn swi_glu_kernel(Isa isa) {
  return core::KernelTable<SwiGluSpanFn>{swi_glu_span_scalar, swi_glu_span_avx2, swi_glu_span_avx512}.pick(isa);
}

}  // namespace tilegrad::ops
