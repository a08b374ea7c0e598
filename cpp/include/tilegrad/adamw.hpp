// AdamW (aclnnApplyAdamWV2 for one tensor, aclnnFusedAdamw for lists), updating in place.
//
// Step convention (the vendor's): the update uses t = step + 1, so pass the number of steps taken
// before this one (torch.optim.AdamW's state["step"] before it increments it). Per element, in fp32:
//   p *= 1 - lr*wd;  m = lerp(m, g, 1 - beta1);  v = beta2*v + (1 - beta2)*g*g;
//   vmax = amsgrad ? max(vmax, v) : v;  p -= lr/(1 - beta1^t) * m / (sqrt(vmax)/sqrt(1 - beta2^t) + eps)
// with g = -grad when maximize. fp16/bf16 operands are widened and each result rounded once.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double weight_decay = 1e-2;
  double eps = 1e-8;
  bool amsgrad = false;
  bool maximize = false;
};

// aclnnApplyAdamWV2: var, m, v (and max_grad_norm, the AMSGrad running maximum of v, required when
// amsgrad) updated in place from grad. Each of var/m/v/max_grad_norm/grad float32, float16 or
// bfloat16 on its own (computed in fp32, each result rounded once to its own dtype); step float32 or
// int64 with one element; equal shapes. Throws tilegrad::Error (161001 / 161002); never writes
// anything when it throws.
TILEGRAD_API void apply_adam_w_v2(const TensorView& var, const TensorView& m, const TensorView& v,
                                  const TensorView& max_grad_norm, const TensorView& grad, const TensorView& step,
                                  const AdamWOptions& options);

// What aclnnFusedAdamw takes beyond its lists, plus two tilegrad extensions (the PyTorch optimizer
// uses them; the C ABI has neither).
struct FusedAdamWExtras {
  TensorView grad_scale;  // optional fp32, one element: grads are multiplied by 1/grad_scale
  TensorView found_inf;   // optional fp32, one element: exactly 1.0 skips the whole update
  // Extension: when finite, the global L2 norm of all grads is computed first (fixed summation
  // order: the same value for any thread count) and the grads are scaled by
  // min(1, max_grad_norm / (norm + 1e-6)) inside the update, as torch.nn.utils.clip_grad_norm_.
  double max_grad_norm = std::numeric_limits<double>::quiet_NaN();
  // Extension: the global norm computed beforehand (adamw_grad_norm over every group's grads), so
  // several calls (param groups) clip with one norm; NaN: computed over this call's grads.
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  // Extension (master weights): params, moments fp32; grads and model_params float16 or bfloat16;
  // each updated fp32 param is also rounded once into model_params[i].
  std::vector<TensorView> model_params;
};

// aclnnFusedAdamw: every list has one tensor per parameter (max_exp_avg_sqs may be empty unless
// amsgrad); all tensors of all lists share one float dtype (extension: see model_params); steps
// float32 or int64, one element each, one dtype. Returns the gradient norm before clipping when
// extras.max_grad_norm is finite, NaN otherwise. Throws tilegrad::Error; never a partial update.
TILEGRAD_API double fused_adamw(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                                const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                                const std::vector<TensorView>& max_exp_avg_sqs,
                                const std::vector<TensorView>& state_steps, const AdamWOptions& options,
                                const FusedAdamWExtras& extras = {});

// The global L2 norm of grads as fused_adamw's clipping computes it (fixed summation order: the
// same value for any thread count and ISA). Grads float32, float16 or bfloat16, any shapes.
TILEGRAD_API double adamw_grad_norm(const std::vector<TensorView>& grads);

}  // namespace tilegrad
