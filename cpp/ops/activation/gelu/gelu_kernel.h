// GELU span kernels (aclnnGelu / aclnnGeluV2 forward, aclnnGeluBackward / V2 gradient): n contiguous
// elements per operand; the form (erf or tanh) and the dtypes are fixed per launch.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// ptrs = {out, x}: out = gelu(x), one dtype for both.
using GeluSpanFn = void (*)(DType dtype, bool tanh, char* const* ptrs, int64_t n, bool streaming_stores);

void gelu_span_scalar(DType, bool, char* const*, int64_t, bool);
void gelu_span_avx2(DType, bool, char* const*, int64_t, bool);
void gelu_span_avx512(DType, bool, char* const*, int64_t, bool);

inline GeluSpanFn gelu_kernel(Isa isa) {
  return core::KernelTable<GeluSpanFn>{gelu_span_scalar, gelu_span_avx2, gelu_span_avx512}.pick(isa);
}

struct GeluGradDtypes {
  DType grad_output, self, grad_input;
};

// ptrs = {gradInput, gradOutput, self}: gradInput = gradOutput * gelu'(self). The three dtypes are
// equal, or the inputs differ and gradInput is float32.
using GeluGradSpanFn = void (*)(const GeluGradDtypes& dtypes, bool tanh, char* const* ptrs, int64_t n,
                                bool streaming_stores);

void gelu_backward_span_scalar(const GeluGradDtypes&, bool, char* const*, int64_t, bool);
void gelu_backward_span_avx2(const GeluGradDtypes&, bool, char* const*, int64_t, bool);
void gelu_backward_span_avx512(const GeluGradDtypes&, bool, char* const*, int64_t, bool);

inline GeluGradSpanFn gelu_backward_kernel(Isa isa) {
  return core::KernelTable<GeluGradSpanFn>{gelu_backward_span_scalar, gelu_backward_span_avx2,
                                           gelu_backward_span_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
