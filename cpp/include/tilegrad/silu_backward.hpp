// SiLU backward (aclnnSiluBackward): gradInput = gradOutput * s * (1 + x * (1 - s)), s = sigmoid(x).
#pragma once

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// grad_output and self broadcast (NumPy rules) to grad_input's shape. dtypes fp32/fp16/bf16: all
// equal, or grad_output != self and grad_input fp32. grad_input may alias an input exactly.
// Throws tilegrad::Error (status 161001/161002) on invalid arguments.
TILEGRAD_API void silu_backward(const TensorView& grad_output, const TensorView& self,
                                const TensorView& grad_input);

// The gradInput a call with these inputs needs: broadcast shape; dtype of the inputs when they
// agree, else float32. Validates the inputs like silu_backward.
TILEGRAD_API OutputSpec silu_backward_output_spec(const TensorView& grad_output, const TensorView& self);

}  // namespace tilegrad
