// gelu_mul / gelu_mul_backward: GeGLU on two separate tensors, out = gelu(gate) * up, the way a Gemma
// MLP combines its gate and up projections (no aclnn operator: the vendor's GeGluV3 takes the two
// halves of one tensor, and its backward wants the saved gelu). Specification section 13. Elementwise
// over (outputs, inputs) of one dtype and shape, tiled like GeGLU (core/elementwise_op_tiling.h).
#include <initializer_list>
#include <vector>

#include "core/elementwise.h"
#include "core/elementwise_op_tiling.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/ge_glu/ge_glu_checks.h"
#include "ops/activation/ge_glu/ge_glu_kernel.h"
#include "tilegrad/ge_glu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kFwd = "gelu_mul";
constexpr const char* kBwd = "gelu_mul_backward";

using Named = core::TraceTensor;  // an operand and its name (the trace line names it)

// `view` is well formed, of a float dtype, and of `like`'s dtype and shape.
void require_like(const char* op, const char* arg, const TensorView& view, const char* like_arg,
                  const TensorView& like) {
  core::require_well_formed(op, arg, view);
  core::require_dtype(op, arg, view, geglu::kFloatTypes);
  core::require_same_dtype(op, arg, view, like_arg, like);
  core::require_shape(op, arg, view, like.shape, "gate shape");
}

// An output: like gate, no self overlap, overlapping an input only exactly (elementwise in place).
void require_output(const char* op, const char* arg, const TensorView& out, const TensorView& gate,
                    std::initializer_list<Named> inputs) {
  require_like(op, arg, out, "gate", gate);
  core::require_no_self_overlap(op, arg, out);
  for (const Named& in : inputs) core::require_no_partial_overlap(op, arg, out, in.name, *in.view, true);
}

// One elementwise pass of a gelu_mul span kernel: operands are the outputs (num_outputs of them), then
// the inputs, all validated by the caller.
class GeluMulLaunch final : public core::Launch {
 public:
  GeluMulLaunch(const char* op, std::initializer_list<Named> operands, int num_outputs, GeluApproximate approximate,
                GeGluSpanFn (*pick_kernel)(Isa))
      : dtype_(operands.begin()->view->dtype), num_outputs_(num_outputs) {
    tanh_ = geglu::is_tanh(op, static_cast<int64_t>(approximate));
    std::vector<const TensorView*> ops;
    for (const Named& named : operands) ops.push_back(named.view);
    layout_ = core::make_elementwise_layout(ops.data(), static_cast<int>(ops.size()));
    tiling_ = core::elementwise_op_tiling(ops[0]->numel(), static_cast<int64_t>(ops.size()) * dtype_size(dtype_),
                                          core::inner_is_contiguous(layout_), core::Platform::current());
    kernel_ = pick_kernel(tiling_.isa);
    trace_.record(op, operands, tiling_);
    trace_.field("approximate", static_cast<int64_t>(approximate));
  }

  void run(void*) override {
    core::run_elementwise(
        layout_, tiling_.tiles,
        [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, tanh_, ptrs, n, streaming); },
        num_outputs_);
  }

 private:
  DType dtype_;
  int num_outputs_;
  bool tanh_ = false;
  core::ElementwiseLayout layout_;
  core::ElementwiseOpTiling tiling_;
  GeGluSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void gelu_mul(const TensorView& gate, const TensorView& up, GeluApproximate approximate, const TensorView& out) {
  using namespace ops;
  require_like(kFwd, "gate", gate, "gate", gate);
  require_like(kFwd, "up", up, "gate", gate);
  require_output(kFwd, "out", out, gate, {{"gate", &gate}, {"up", &up}});
  GeluMulLaunch launch(kFwd, {{"out", &out}, {"gate", &gate}, {"up", &up}}, 1, approximate, gelu_mul_kernel);
  core::run_now(kFwd, launch);
}

void gelu_mul_backward(const TensorView& grad_output, const TensorView& gate, const TensorView& up,
                       GeluApproximate approximate, const TensorView& grad_gate, const TensorView& grad_up) {
  using namespace ops;
  require_like(kBwd, "gate", gate, "gate", gate);
  require_like(kBwd, "up", up, "gate", gate);
  require_like(kBwd, "grad_output", grad_output, "gate", gate);
  const std::initializer_list<Named> inputs = {{"grad_output", &grad_output}, {"gate", &gate}, {"up", &up}};
  require_output(kBwd, "grad_gate", grad_gate, gate, inputs);
  require_output(kBwd, "grad_up", grad_up, gate, inputs);
  core::require_no_partial_overlap(kBwd, "grad_up", grad_up, "grad_gate", grad_gate, false);
  GeluMulLaunch launch(kBwd,
                       {{"grad_gate", &grad_gate}, {"grad_up", &grad_up}, {"grad_output", &grad_output},
                        {"gate", &gate}, {"up", &up}},
                       2, approximate, gelu_mul_backward_kernel);
  core::run_now(kBwd, launch);
}

}  // namespace tilegrad
