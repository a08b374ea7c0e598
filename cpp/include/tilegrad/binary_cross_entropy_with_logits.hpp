// Binary cross entropy with logits, the forward loss (aclnnBinaryCrossEntropyWithLogits):
// per element l = -weight * (pos_weight * target * log(sigmoid(self)) + (1 - target) * log(1 - sigmoid(self))),
// computed in a form stable for logits of any magnitude; out = l (Reduction::kNone), its mean over
// numel(self) (kMean) or its sum (kSum), reduced in a fixed order whatever the thread count.
#pragma once

#include "tilegrad/export.h"
#include "tilegrad/reduction.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// weight and pos_weight broadcast (NumPy rules, 0-d included) to self's shape; target has self's
// shape. dtypes fp32/fp16/bf16 in any mix (computed in fp32); out's dtype must equal target's. out has
// self's shape for kNone, else one element (shape {} or {1}). weight / pos_weight are optional: pass
// an empty TensorView (TensorView{}) for "absent" (all ones). For kNone, out may alias self or target
// exactly (same data, dtype, shape, strides). An empty self writes nothing for kNone, NaN for kMean
// and 0 for kSum. Throws tilegrad::Error (161001/161002) on invalid arguments.
TILEGRAD_API void binary_cross_entropy_with_logits(const TensorView& self, const TensorView& target,
                                                   const TensorView& weight, const TensorView& pos_weight,
                                                   Reduction reduction, const TensorView& out);

// The out a call with these inputs needs: self's shape for kNone, else shape {} (0-d); target's
// dtype. Validates the inputs like binary_cross_entropy_with_logits.
TILEGRAD_API OutputSpec binary_cross_entropy_with_logits_output_spec(const TensorView& self, const TensorView& target,
                                                                     const TensorView& weight,
                                                                     const TensorView& pos_weight, Reduction reduction);

}  // namespace tilegrad
