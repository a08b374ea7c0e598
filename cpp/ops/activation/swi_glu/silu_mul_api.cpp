// silu_mul / silu_mul_grad: the SwiGLU formula on two separate tensors, out = silu(gate) * up, the way
// a Llama MLP combines its gate and up projections (no aclnn operator: the vendor's SwiGlu takes the
// two halves of one tensor). The same span kernels and launch as aclnnSwiGlu / aclnnSwiGluGrad.
#include "core/error.h"
#include "core/tensor.h"
#include "ops/activation/swi_glu/swi_glu_checks.h"
#include "ops/activation/swi_glu/swi_glu_grad_kernel.h"
#include "ops/activation/swi_glu/swi_glu_launch.h"
#include "tilegrad/swi_glu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kFwd = "silu_mul";
constexpr const char* kGrad = "silu_mul_grad";

// `view` is well formed, of a float dtype, and of `like`'s dtype and shape.
void require_like(const char* op, const char* arg, const TensorView& view, const char* like_arg,
                  const TensorView& like) {
  core::require_well_formed(op, arg, view);
  core::require_dtype(op, arg, view, swiglu::kFloatTypes);
  core::require_same_dtype(op, arg, view, like_arg, like);
  swiglu::check_shape(view.shape == like.shape, op, ": ", arg, " shape must equal ", like_arg, " shape ",
                      shape_str(like.shape), ", got ", shape_str(view.shape));
}

// An output: like `like`, no self overlap, and overlapping an input only exactly (elementwise in place).
void require_output(const char* op, const char* arg, const TensorView& out, const char* like_arg,
                    const TensorView& like, std::initializer_list<std::pair<const char*, const TensorView*>> inputs) {
  require_like(op, arg, out, like_arg, like);
  core::require_no_self_overlap(op, arg, out);
  for (const auto& [name, input] : inputs) core::require_no_partial_overlap(op, arg, out, name, *input, true);
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void silu_mul(const TensorView& gate, const TensorView& up, const TensorView& out) {
  using namespace ops;
  require_like(kFwd, "gate", gate, "gate", gate);
  require_like(kFwd, "up", up, "gate", gate);
  require_output(kFwd, "out", out, "gate", gate, {{"gate", &gate}, {"up", &up}});
  SwiGluSpansLaunch launch({out, gate, up}, 1, swi_glu_kernel);
  launch.record(kFwd, {{"gate", &gate}, {"up", &up}, {"out", &out}}, -1);
  core::run_now(kFwd, launch);
}

void silu_mul_grad(const TensorView& dy, const TensorView& gate, const TensorView& up, const TensorView& d_gate,
                   const TensorView& d_up) {
  using namespace ops;
  require_like(kGrad, "gate", gate, "gate", gate);
  require_like(kGrad, "up", up, "gate", gate);
  require_like(kGrad, "dy", dy, "gate", gate);
  const std::initializer_list<std::pair<const char*, const TensorView*>> inputs = {
      {"dy", &dy}, {"gate", &gate}, {"up", &up}};
  require_output(kGrad, "d_gate", d_gate, "gate", gate, inputs);
  require_output(kGrad, "d_up", d_up, "gate", gate, inputs);
  core::require_no_partial_overlap(kGrad, "d_up", d_up, "d_gate", d_gate, false);
  SwiGluSpansLaunch launch({d_gate, d_up, dy, gate, up}, 2, swi_glu_grad_kernel);
  launch.record(kGrad, {{"dy", &dy}, {"gate", &gate}, {"up", &up}, {"d_gate", &d_gate}, {"d_up", &d_up}}, -1);
  core::run_now(kGrad, launch);
}

}  // namespace tilegrad
