// BCE-with-logits backward kernels: one contiguous span per call. The launch picks one specialised
// span function per call (dtypes and which operands are present are fixed by then).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_operand.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// What a span function is specialised for. Vector operands appear in ptrs in this order:
// out, self, target, [gradOutput], [weight], [posWeight].
struct BceVariant {
  DType out = DType::kFloat32, self = DType::kFloat32, target = DType::kFloat32;
  BceOperand grad_output = BceOperand::kVector, weight = BceOperand::kAbsent, pos_weight = BceOperand::kAbsent;
  DType grad_output_dtype = DType::kFloat32, weight_dtype = DType::kFloat32, pos_weight_dtype = DType::kFloat32;
};

// Per-launch constants: factor = (scalar gradOutput) * (scalar weight) * scale, each operand only
// where it is kScalar; pos_weight = the scalar posWeight (kScalar only); inputs = the dtypes of the
// input pointers in ptrs[1..] (read by the mixed-dtype path).
struct BceSpanParams {
  float factor = 1.0f;
  float pos_weight = 1.0f;
  DType inputs[5] = {DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32};
};

// out[i] = g(self[i], target[i], posWeight[i]) * gradOutput[i] * weight[i] * factor over n
// contiguous elements; ptrs[k] points at operand k in its own dtype. With streaming_stores the
// output is written with non-temporal stores.
using BceSpanFn = void (*)(const BceSpanParams& params, char* const* ptrs, int64_t n, bool streaming_stores);

// The span function for a variant at one ISA level (never null).
using BceSelectFn = BceSpanFn (*)(const BceVariant& variant);

BceSpanFn bce_backward_select_scalar(const BceVariant&);
BceSpanFn bce_backward_select_avx2(const BceVariant&);
BceSpanFn bce_backward_select_avx512(const BceVariant&);

inline BceSpanFn bce_backward_kernel(Isa isa, const BceVariant& variant) {
  return core::KernelTable<BceSelectFn>{bce_backward_select_scalar, bce_backward_select_avx2,
                                        bce_backward_select_avx512}
      .pick(isa)(variant);
}

}  // namespace tilegrad::ops
