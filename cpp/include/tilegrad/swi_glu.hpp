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

// silu_mul: out = silu(gate) * up on two tensors of one dtype and shape (a Llama MLP's separate gate
// and up projections; the same kernels as swi_glu). out: that dtype and shape, any strides; it may be
// gate or up exactly (in place), never overlap them otherwise.
TILEGRAD_API void silu_mul(const TensorView& gate, const TensorView& up, const TensorView& out);

// silu_mul's gradients: d_gate = dy * up * s * (1 + gate * (1 - s)), d_up = dy * gate * s,
// s = sigmoid(gate); every tensor of gate's dtype and shape; d_gate and d_up never overlap each other.
TILEGRAD_API void silu_mul_grad(const TensorView& dy, const TensorView& gate, const TensorView& up,
                                const TensorView& d_gate, const TensorView& d_up);

}  // namespace tilegrad
