// GELU forward and gradient (aclnnGelu, aclnnGeluV2, aclnnGeluBackward, aclnnGeluBackwardV2):
//   erf form (kNone):  gelu(x) = x * Phi(x),                     gelu'(x) = Phi(x) + x * phi(x)
//   tanh form (kTanh): gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
// fp32 arithmetic, each output rounded once to its dtype.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// The values are the vendor's int64 codes (aclnnGeluV2's, aclnnGeGluV3's `approximate`); the
// backward's C ABI spells them "none" | "tanh".
enum class GeluApproximate : int64_t {
  kNone = 0,  // exact: the normal CDF (erf)
  kTanh = 1,  // the tanh approximation
};

// x fp32/fp16/bf16, rank <= 8; out: x's dtype and shape, any strides; out may be x itself (in
// place), never overlap it otherwise. Throws tilegrad::Error.
TILEGRAD_API void gelu(const TensorView& x, GeluApproximate approximate, const TensorView& out);

// grad_output and self broadcast (NumPy rules) to grad_input's shape. dtypes fp32/fp16/bf16: all
// equal, or grad_output != self and grad_input fp32. grad_input may alias an input exactly.
TILEGRAD_API void gelu_backward(const TensorView& grad_output, const TensorView& self, GeluApproximate approximate,
                                const TensorView& grad_input);

// The grad_input a call with these inputs needs: broadcast shape; dtype of the inputs when they
// agree, else float32. Validates the inputs like gelu_backward.
TILEGRAD_API OutputSpec gelu_backward_output_spec(const TensorView& grad_output, const TensorView& self);

}  // namespace tilegrad
