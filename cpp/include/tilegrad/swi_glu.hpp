// SwiGLU forward and backward (aclnnSwiGlu, aclnnSwiGluGrad): x split along dim into halves
// a (first) and b (second); out = silu(a) * b; dx = cat(da, db) with
//   da = dy * b * s * (1 + a * (1 - s)),  db = dy * a * s,  s = sigmoid(a).
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// x fp32/fp16/bf16, rank 1..8, x.shape[dim] even (dim in [-rank, rank)); out: x's dtype and shape
// with dim halved, any strides, not overlapping x. Throws tilegrad::Error.
TILEGRAD_API void swi_glu(const TensorView& x, int64_t dim, const TensorView& out);
TILEGRAD_API OutputSpec swi_glu_output_spec(const TensorView& x, int64_t dim);

// y_grad: x's dtype and shape with dim halved; out (dx): x's dtype and shape; out may alias x exactly.
TILEGRAD_API void swi_glu_grad(const TensorView& y_grad, const TensorView& x, int64_t dim, const TensorView& out);
TILEGRAD_API OutputSpec swi_glu_grad_output_spec(const TensorView& y_grad, const TensorView& x, int64_t dim);

}  // namespace tilegrad
