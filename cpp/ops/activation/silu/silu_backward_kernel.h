// SiLU backward kernels: one contiguous span per call, dtypes fixed by the tiling.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct SiluDtypes {
  DType grad_output, self, grad_input;
};

// ptrs = {gradInput, gradOutput, self}, each pointing at n contiguous elements of its dtype.
using SiluSpanFn = void (*)(const SiluDtypes& dtypes, char* const* ptrs, int64_t n, bool streaming_stores);

void silu_backward_span_scalar(const SiluDtypes&, char* const*, int64_t, bool);
void silu_backward_span_avx2(const SiluDtypes&, char* const*, int64_t, bool);
void silu_backward_span_avx512(const SiluDtypes&, char* const*, int64_t, bool);

inline SiluSpanFn silu_backward_kernel(Isa isa) {
  return core::KernelTable<SiluSpanFn>{silu_backward_span_scalar, silu_backward_span_avx2, silu_backward_span_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
