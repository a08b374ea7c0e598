// GeGLU forward and backward (aclnnGeGluV3, aclnnGeGluV3Backward): self split along dim into halves
// A (first) and B (second); the activated half h is A when activate_left, else B, and l is the other:
//   out = gelu(h) * l,   out_gelu = gelu(h)                          (gelu: tilegrad/gelu.hpp)
//   grad_input = the halves dh = dy * l * gelu'(h) and dl = dy * gelu, in self's layout
// fp32 arithmetic, each output rounded once to self's dtype.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/gelu.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// self fp32/fp16/bf16, rank 1..8, self.shape[dim] even (dim in [-rank, rank)); out and out_gelu:
// self's dtype and shape with dim halved, any strides, overlapping neither self nor each other.
// Throws tilegrad::Error.
TILEGRAD_API void ge_glu(const TensorView& self, int64_t dim, GeluApproximate approximate, bool activate_left,
                         const TensorView& out, const TensorView& out_gelu);
// The out (and out_gelu) a call with this self and dim needs. Validates them like ge_glu.
TILEGRAD_API OutputSpec ge_glu_output_spec(const TensorView& self, int64_t dim);

// grad_output and gelu (the forward's out_gelu): self's dtype and shape with dim halved; grad_input:
// self's dtype and shape, any strides; it may be self itself (in place), never overlap the others.
TILEGRAD_API void ge_glu_backward(const TensorView& grad_output, const TensorView& self, const TensorView& gelu,
                                  int64_t dim, GeluApproximate approximate, bool activate_left,
                                  const TensorView& grad_input);
// The grad_input a call with these inputs needs (self's dtype and shape). Validates them like ge_glu_backward.
TILEGRAD_API OutputSpec ge_glu_backward_output_spec(const TensorView& grad_output, const TensorView& self,
                                                    const TensorView& gelu, int64_t dim);

// gelu_mul: out = gelu(gate) * up on two tensors of one dtype (fp32/fp16/bf16) and shape (a Gemma MLP's
// separate gate and up projections; the GeGLU formula with the gate activated). out: that dtype and
// shape, any strides; it may be gate or up exactly (in place), never overlap them otherwise.
TILEGRAD_API void gelu_mul(const TensorView& gate, const TensorView& up, GeluApproximate approximate,
                           const TensorView& out);

// gelu_mul's gradients: grad_gate = grad_output * up * gelu'(gate), grad_up = grad_output * gelu(gate)
// (gelu recomputed from gate); every tensor of gate's dtype and shape; the gradients may each be an
// input exactly, never overlap each other.
TILEGRAD_API void gelu_mul_backward(const TensorView& grad_output, const TensorView& gate, const TensorView& up,
                                    GeluApproximate approximate, const TensorView& grad_gate,
                                    const TensorView& grad_up);

}  // namespace tilegrad
