// RMSNorm forward and backward (aclnnRmsNorm, aclnnRmsNormGrad), the vendor's single-rounding form:
//   rstd = 1 / sqrt(mean(x^2 over gamma's dims) + epsilon),  y = (x * rstd) * gamma
//   dx = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd,  dgamma = sum over rows of dy * xhat,
//   xhat = x * rstd. gamma spans x's trailing dims; rows are x's leading dims.
#pragma once

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

struct RmsNormOutputSpecs {
  OutputSpec y, rstd;  // y: x's shape and dtype; rstd: float32, x's leading dims then ones
};
struct RmsNormGradOutputSpecs {
  OutputSpec dx, dgamma;  // dx: x's shape and dtype; dgamma: gamma's shape, float32
};

// dtypes (x, gamma): (f32, f32), (f16, f16), (bf16, bf16), (f16, f32), (bf16, f32); y has x's dtype,
// rstd float32. epsilon >= 0. Any strides; y may alias x exactly. Throws tilegrad::Error.
// weight_offset (finite) is added to gamma in fp32 after widening: 1 gives Gemma's
// y = (x * rstd) * (1 + gamma) (aclnnGemmaRmsNorm); 0, the default, is aclnnRmsNorm.
TILEGRAD_API void rms_norm(const TensorView& x, const TensorView& gamma, double epsilon, const TensorView& y,
                           const TensorView& rstd, double weight_offset = 0.0);
TILEGRAD_API RmsNormOutputSpecs rms_norm_output_specs(const TensorView& x, const TensorView& gamma);

// dy and x share a dtype; rstd float32 with R = prod(x's leading dims) elements (the forward's
// rstd, or any shape equal to x's leading dims once size-1 dims are dropped); gamma as the forward;
// dx has x's dtype, dgamma float32 (overwritten, deterministic: a fixed summation order).
// weight_offset: the forward's (dx uses gamma + weight_offset; dgamma is the same either way). The
// vendor has no Gemma gradient operator: this is tilegrad's.
TILEGRAD_API void rms_norm_grad(const TensorView& dy, const TensorView& x, const TensorView& rstd,
                                const TensorView& gamma, const TensorView& dx, const TensorView& dgamma,
                                double weight_offset = 0.0);
TILEGRAD_API RmsNormGradOutputSpecs rms_norm_grad_output_specs(const TensorView& dy, const TensorView& x,
                                                               const TensorView& rstd, const TensorView& gamma);

}  // namespace tilegrad
