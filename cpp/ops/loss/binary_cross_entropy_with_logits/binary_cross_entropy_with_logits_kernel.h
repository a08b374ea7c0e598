// BCE-with-logits forward kernels: one contiguous span per call, either writing the per-element
// loss (reduction none) or returning the span's sum (mean / sum). The launch picks one specialised
// span function per call (dtypes, mode and which operands are vectors are fixed by then).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_operand.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// What a span function is specialised for. Vector operands appear in ptrs in this order:
// out (unused when reduce), self, target, [weight], [posWeight]. inputs_dtype is the dtype every
// input has when they all share one (the direct path), kUndefined for a mix (widened to fp32 in
// stack chunks first).
struct BceForwardVariant {
  bool reduce = false;                // mean / sum: return the span's sum, write nothing
  DType out = DType::kFloat32;        // the output's dtype (none only)
  DType inputs_dtype = DType::kFloat32;
  bool weight_vector = false;         // false: weight absent or one element (folded into factor)
  BceOperand pos_weight = BceOperand::kAbsent;  // kAbsent: log_weight = 1
};

// Per-launch constants: factor = the one-element weight (1 when absent or a vector); pos_weight =
// the one-element posWeight (kScalar only); inputs = the dtypes of the input pointers ptrs[1..]
// (read by the mixed-dtype path).
struct BceForwardParams {
  float factor = 1.0f;
  float pos_weight = 1.0f;
  DType inputs[4] = {DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kFloat32};
};

// Over n contiguous elements, with omt = 1 - t, pt = posWeight * t (t without posWeight),
// L = log1p(exp(-|x|)) and lw = omt + pt (1 without posWeight):
//   loss[i] = (lw * L + (x >= 0 ? omt * x : -pt * x)) * weight[i] * factor
// ptrs[k] points at operand k in its own dtype. none: writes loss to ptrs[0] (non-temporal stores
// with streaming_stores) and returns 0; reduce: returns the sum of the n losses, accumulated in fp32
// vectors flushed to double every kReduceFlushElems elements, in an order fixed by n alone.
using BceForwardSpanFn = double (*)(const BceForwardParams& params, char* const* ptrs, int64_t n,
                                    bool streaming_stores);

// The span function for a variant at one ISA level (never null).
using BceForwardSelectFn = BceForwardSpanFn (*)(const BceForwardVariant& variant);

BceForwardSpanFn bce_forward_select_scalar(const BceForwardVariant&);
BceForwardSpanFn bce_forward_select_avx2(const BceForwardVariant&);
BceForwardSpanFn bce_forward_select_avx512(const BceForwardVariant&);

inline BceForwardSpanFn bce_forward_kernel(Isa isa, const BceForwardVariant& variant) {
  return core::KernelTable<BceForwardSelectFn>{bce_forward_select_scalar, bce_forward_select_avx2,
                                               bce_forward_select_avx512}
      .pick(isa)(variant);
}

}  // namespace tilegrad::ops
