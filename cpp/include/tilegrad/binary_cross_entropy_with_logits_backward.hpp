// Binary cross entropy with logits backward (aclnnBinaryCrossEntropyWithLogitsBackward):
// s = sigmoid(self); g = (pt + 1 - target) * s - pt with pt = pos_weight * target (g = s - target
// without pos_weight); out = g * grad_output * weight * scale, scale = 1 / max(1, numel(self)) for
// Reduction::kMean, else 1.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/reduction.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// grad_output, weight and pos_weight broadcast (NumPy rules, 0-d included) to self's shape; target
// and out have self's shape. dtypes fp32/fp16/bf16 in any mix (computed in fp32); out's dtype must
// equal target's. weight / pos_weight are optional: pass an empty TensorView (TensorView{}) for
// "absent" (all ones). out may alias an input exactly (same data, dtype, shape, strides).
// Throws tilegrad::Error (161001/161002) on invalid arguments.
TILEGRAD_API void binary_cross_entropy_with_logits_backward(const TensorView& grad_output, const TensorView& self,
                                                            const TensorView& target, const TensorView& weight,
                                                            const TensorView& pos_weight, Reduction reduction,
                                                            const TensorView& out);

// The out a call with these inputs needs: self's shape, target's dtype. Validates the inputs like
// binary_cross_entropy_with_logits_backward.
TILEGRAD_API OutputSpec binary_cross_entropy_with_logits_backward_output_spec(const TensorView& grad_output,
                                                                              const TensorView& self,
                                                                              const TensorView& target,
                                                                              const TensorView& weight,
                                                                              const TensorView& pos_weight);

}  // namespace tilegrad
