// LayerNorm forward and backward (aclnnLayerNorm, aclnnLayerNormBackward), over the trailing dims
// named by normalized_shape (rows are x's leading dims), in fp32 with one rounding per output:
//   mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + eps),  out = (x - mean) * rstd * weight + bias
//   dx = rstd * (dy*w - mean_N(dy*w) - xhat * mean_N(dy*w*xhat)),  xhat = (x - mean) * rstd,
//   dweight = sum over rows of dy * xhat,  dbias = sum over rows of dy.
#pragma once

#include <cstdint>
#include <vector>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

struct LayerNormOutputSpecs {
  OutputSpec out, mean, rstd;  // out: x's shape and dtype; mean, rstd: float32, x's leading dims then ones
};
struct LayerNormBackwardOutputSpecs {
  OutputSpec dx, dweight, dbias;  // dx: x's shape and dtype; dweight, dbias: float32, normalized_shape
};

// x: rank 1..8, float32 / float16 / bfloat16; normalized_shape: x's trailing dims (1..rank(x) of them).
// weight, bias: optional (TensorView{}: ones / zeros), shape normalized_shape, x's dtype or float32,
// the same dtype when both are given. out: x's shape and dtype (may alias x exactly). mean, rstd:
// optional (TensorView{}: not written), float32 or x's dtype, x's leading dims (size-1 dims aside).
// Any strides. Throws tilegrad::Error.
TILEGRAD_API void layer_norm(const TensorView& x, const std::vector<int64_t>& normalized_shape,
                             const TensorView& weight, const TensorView& bias, double eps, const TensorView& out,
                             const TensorView& mean, const TensorView& rstd);
TILEGRAD_API LayerNormOutputSpecs layer_norm_output_specs(const TensorView& x,
                                                          const std::vector<int64_t>& normalized_shape);

// dy and x share a dtype and a shape; mean / rstd the forward's (float32 or x's dtype); weight, bias as
// the forward (bias is only validated: the gradients do not depend on it). Each output is optional
// (TensorView{}: not computed): dx x's shape and dtype, may alias dy or x exactly; dweight / dbias
// normalized_shape, float32 or the weight's dtype, overwritten, summed in a fixed order (bit-identical
// for every thread count); with no rows they are zeros.
TILEGRAD_API void layer_norm_backward(const TensorView& dy, const TensorView& x,
                                      const std::vector<int64_t>& normalized_shape, const TensorView& mean,
                                      const TensorView& rstd, const TensorView& weight, const TensorView& bias,
                                      const TensorView& dx, const TensorView& dweight, const TensorView& dbias);
TILEGRAD_API LayerNormBackwardOutputSpecs layer_norm_backward_output_specs(
    const TensorView& x, const std::vector<int64_t>& normalized_shape);

}  // namespace tilegrad
