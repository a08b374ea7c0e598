// Linear layer forward and backward (specification section 11), PyTorch's F.linear:
//   y = x @ weight^T + bias                       x [M, K], weight [N, K], bias [N] (optional)
//   dx = dy @ weight,  dweight = dy^T @ x,  dbias = sum over rows of dy
// fp32 / fp16 / bf16 operands of one dtype, fp32 accumulation, each output rounded once to that
// dtype; results are the same bit for bit for every thread count.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// x [M, K] and weight [N, K] row- or column-major with a leading dimension (a transposed view is
// fine, other strides are refused: copy them first); bias [N] any stride or absent (TensorView{});
// out [M, N] of x's dtype, row- or column-major, overlapping no input. Throws tilegrad::Error.
TILEGRAD_API void linear(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& out);
TILEGRAD_API OutputSpec linear_output_spec(const TensorView& x, const TensorView& weight, const TensorView& bias);

// The gradients linear_backward writes; an absent view (TensorView{}) is not computed.
struct LinearGrads {
  TensorView grad_input;   // [M, K], like x
  TensorView grad_weight;  // [N, K], like weight
  TensorView grad_bias;    // [N], any stride
};

// grad_output [M, N], x [M, K], weight [N, K], one dtype, layouts as for linear(); every given
// gradient has that dtype and overlaps no input and no other gradient. dbias is summed over the
// rows in a fixed order (blocks of rows that depend on the shape only, fp32 within a block, the
// blocks added in double).
TILEGRAD_API void linear_backward(const TensorView& grad_output, const TensorView& x, const TensorView& weight,
                                  const LinearGrads& grads);

}  // namespace tilegrad
