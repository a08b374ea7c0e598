// Residual add fused into RMSNorm (aclnnAddRmsNorm) and tilegrad's fused backward (no vendor operator):
//   x_out = x1 + x2 (rounded to x1's dtype), rstd = 1 / sqrt(mean(x_out^2 over gamma's dims) + epsilon),
//   y = (x_out * rstd) * gamma (fp32 arithmetic, one rounding): rms_norm(x_out, gamma) bit for bit.
//   Backward: dx = rms_norm_grad's dx (+ dresidual, the gradient reaching x_out from the residual
//   path), the gradient of both x1 and x2; dgamma as rms_norm_grad's.
#pragma once

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

struct AddRmsNormOutputSpecs {
  OutputSpec y, rstd, x_out;  // y and x_out: x1's shape and dtype; rstd: float32, x1's leading dims then ones
};
struct AddRmsNormBackwardOutputSpecs {
  OutputSpec dx, dgamma;  // dx: x_out's shape and dtype; dgamma: gamma's shape, float32
};

// x1, x2, gamma, y and x_out share one dtype (float32, float16 or bfloat16); x2 has x1's shape;
// rstd float32. epsilon >= 0. Empty x1: nothing to do. Any strides; y and x_out may each alias x1 or
// x2 exactly. Throws tilegrad::Error (the C ABI's status codes).
TILEGRAD_API void add_rms_norm(const TensorView& x1, const TensorView& x2, const TensorView& gamma, double epsilon,
                               const TensorView& y, const TensorView& rstd, const TensorView& x_out);
TILEGRAD_API AddRmsNormOutputSpecs add_rms_norm_output_specs(const TensorView& x1, const TensorView& x2,
                                                             const TensorView& gamma);

// rms_norm_grad(dy, x_out, rstd, gamma) with dresidual (nullptr, or x_out's shape and dtype) added to
// dx in fp32 before its one rounding, in the same pass. dx may alias dy, x_out or dresidual exactly.
TILEGRAD_API void add_rms_norm_backward(const TensorView& dy, const TensorView& x_out, const TensorView& rstd,
                                        const TensorView& gamma, const TensorView* dresidual, const TensorView& dx,
                                        const TensorView& dgamma);
TILEGRAD_API AddRmsNormBackwardOutputSpecs add_rms_norm_backward_output_specs(const TensorView& dy,
                                                                              const TensorView& x_out,
                                                                              const TensorView& rstd,
                                                                              const TensorView& gamma);

}  // namespace tilegrad
