// Cross entropy (aclnnCrossEntropyLoss, aclnnCrossEntropyLossGrad), specification section 3:
//   lse_i = log sum_c exp(x_ic), logProb = x - lse, m_i = (t_i != ignore_index),
//   l_i = m_i * [(1-ls) * (-w[t_i] * logProb_{i,t_i}) + (ls/C) * (-sum_c w_c logProb_ic)] + m_i * z * lse_i^2
// reduced none (N), sum or mean (CE part / sum_i w[t_i] m_i, z part / sum_i m_i); the gradient
// is the exact vector-Jacobian product of that forward w.r.t. x, computed from logProb in one pass.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/reduction.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

struct CrossEntropyOptions {
  Reduction reduction = Reduction::kMean;
  int64_t ignore_index = -100;   // rows with this target are masked, whatever its sign
  double label_smoothing = 0.0;  // in [0, 1]
  double lse_square_scale_for_zloss = 0.0;
};

// Forward. input (N, C) fp32/fp16/bf16; target (N) int64 or int32; weight (C) fp32 or the empty
// TensorView{} when absent (all ones). Outputs share input's dtype: loss (N) for kNone, 0-d or
// (1) otherwise; log_prob (N, C); zloss like loss and lse_for_zloss (N) are optional (TensorView{}
// skips them). A target outside [0, C) that is not ignore_index throws (status 161002, ErrorKind::kIndex).
TILEGRAD_API void cross_entropy_loss(const TensorView& input, const TensorView& target, const TensorView& weight,
                                     const CrossEntropyOptions& options, const TensorView& loss,
                                     const TensorView& log_prob, const TensorView& zloss,
                                     const TensorView& lse_for_zloss);

struct CrossEntropyLossOutputSpecs {
  OutputSpec loss, log_prob, zloss, lse_for_zloss;
};
// Shapes and dtypes the forward's outputs need (loss and zloss 0-d for mean/sum). Validates the inputs.
TILEGRAD_API CrossEntropyLossOutputSpecs cross_entropy_loss_output_specs(const TensorView& input,
                                                                         const TensorView& target,
                                                                         Reduction reduction);

// Gradient w.r.t. the forward's input. grad_loss (N) for kNone, 0-d or (1) otherwise; log_prob
// (N, C); grad_zloss (like grad_loss) and lse_for_zloss (N) optional (TensorView{}), used only when
// lse_square_scale_for_zloss != 0 and lse_for_zloss is given. grad_loss, log_prob, grad_zloss,
// lse_for_zloss and x_grad share one dtype of fp32/fp16/bf16. x_grad may be log_prob itself (in place).
TILEGRAD_API void cross_entropy_loss_grad(const TensorView& grad_loss, const TensorView& log_prob,
                                          const TensorView& target, const TensorView& weight,
                                          const TensorView& grad_zloss, const TensorView& lse_for_zloss,
                                          const CrossEntropyOptions& options, const TensorView& x_grad);

}  // namespace tilegrad
