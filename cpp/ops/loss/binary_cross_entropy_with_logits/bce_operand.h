// How an optional or broadcast operand of the BCE-with-logits family (forward and backward) reaches
// its kernel: absent, one element folded into a per-launch constant, or a pointer per span.
#pragma once

#include <cstdint>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

enum class BceOperand : int {
  kAbsent = 0,  // not given: all ones
  kScalar = 1,  // one element broadcast everywhere: read once, passed as a float
  kVector = 2,  // a pointer in the span's ptrs
};

// v (null: absent) over an operation on numel elements: one element broadcast to more is a scalar.
inline BceOperand bce_operand(const TensorView* v, int64_t numel) {
  if (!v) return BceOperand::kAbsent;
  return v->numel() == 1 && numel > 1 ? BceOperand::kScalar : BceOperand::kVector;
}

}  // namespace tilegrad::ops
