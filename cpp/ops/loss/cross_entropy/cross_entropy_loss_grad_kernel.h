// Cross-entropy gradient kernel: one contiguous span of one row per call.
//   out_j = p_coef * exp(logProb_j) + add_coef * (weight ? weight_j : 1)   (+ target_add at j = target)
// computed in fp32 with one fma per element (the true-class term enters the fma's addend, so
// p - 1 is never rounded on its own), then rounded once to the dtype.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct CeGradSpan {
  const char* log_prob = nullptr;  // n contiguous elements of dtype
  char* out = nullptr;             // n contiguous elements of dtype
  int64_t n = 0;
  const float* weight = nullptr;   // weight of the span's columns (contiguous), or null: constant addend
  float p_coef = 0, add_coef = 0;
  int64_t target = -1;             // position of the true class inside the span, or -1
  float target_add = 0;
  bool zero = false;               // ignored row: writes zeros
};

using CeGradSpanFn = void (*)(DType dtype, const CeGradSpan& span, bool streaming_stores);

void cross_entropy_loss_grad_span_scalar(DType, const CeGradSpan&, bool);
void cross_entropy_loss_grad_span_avx2(DType, const CeGradSpan&, bool);
void cross_entropy_loss_grad_span_avx512(DType, const CeGradSpan&, bool);

inline CeGradSpanFn cross_entropy_loss_grad_kernel(Isa isa) {
  return core::KernelTable<CeGradSpanFn>{cross_entropy_loss_grad_span_scalar, cross_entropy_loss_grad_span_avx2,
                                         cross_entropy_loss_grad_span_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
