// aclnnSiluBackward: validation (specification section 1), launch, native C++ API and C ABI.
#include <memory>

#include "aclnnop/aclnn_silu_backward.h"
#include "core/acl_tensor.h"
#include "core/elementwise.h"
#include "core/elementwise_op_tiling.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/silu/silu_backward_kernel.h"
#include "tilegrad/silu_backward.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnSiluBackward";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// Inputs alone: dtypes, ranks, broadcast. Returns the gradInput they call for.
OutputSpec validate_inputs(const TensorView& dy, const TensorView& x) {
  core::require_well_formed(kOp, "gradOutput", dy);
  core::require_well_formed(kOp, "self", x);
  core::require_dtype(kOp, "gradOutput", dy, kFloatTypes);
  core::require_dtype(kOp, "self", x, kFloatTypes);
  core::require_rank_at_most(kOp, "gradOutput", dy);
  core::require_rank_at_most(kOp, "self", x);
  OutputSpec spec;
  spec.dtype = dy.dtype == x.dtype ? x.dtype : DType::kFloat32;
  spec.shape = core::broadcast_shapes(kOp, "gradOutput", dy.shape, "self", x.shape);
  return spec;
}

// The rules that depend on addresses: gradInput may alias an input exactly (in place), never partly.
void check_overlaps(const TensorView& dy, const TensorView& x, const TensorView& dx) {
  core::require_no_partial_overlap(kOp, "gradInput", dx, "gradOutput", dy, true);
  core::require_no_partial_overlap(kOp, "gradInput", dx, "self", x, true);
}

void validate(const TensorView& dy, const TensorView& x, const TensorView& dx) {
  core::require_well_formed(kOp, "gradInput", dx);
  core::require_dtype(kOp, "gradOutput", dy, kFloatTypes);
  core::require_dtype(kOp, "self", x, kFloatTypes);
  core::require_dtype(kOp, "gradInput", dx, kFloatTypes);
  if (dy.dtype == x.dtype)
    core::check(dx.dtype == x.dtype, kOp, ": gradInput dtype ", dtype_name(dx.dtype), " != self dtype ",
                dtype_name(x.dtype), " (gradOutput and self share a dtype, so gradInput must too)");
  else
    core::check(dx.dtype == DType::kFloat32, kOp, ": gradOutput dtype ", dtype_name(dy.dtype), " != self dtype ",
                dtype_name(x.dtype), ", so gradInput must be float32, got ", dtype_name(dx.dtype));
  core::require_rank_at_most(kOp, "gradInput", dx);
  const OutputSpec spec = validate_inputs(dy, x);
  if (dy.shape == x.shape)
    core::require_shape(kOp, "gradInput", dx, x.shape, "self shape");
  else
    core::check(dx.shape == spec.shape, kOp, ": gradInput shape ", shape_str(dx.shape),
                " != broadcast of gradOutput ", shape_str(dy.shape), " and self ", shape_str(x.shape), " = ",
                shape_str(spec.shape));
  core::require_no_self_overlap(kOp, "gradInput", dx);
  check_overlaps(dy, x, dx);
}

class SiluBackwardLaunch final : public core::Launch {
 public:
  SiluBackwardLaunch(const TensorView& dy, const TensorView& x, const TensorView& dx) {
    validate(dy, x, dx);
    const TensorView* ops[3] = {&dx, &dy, &x};
    layout_ = core::make_elementwise_layout(ops, 3);
    dtypes_ = {dy.dtype, x.dtype, dx.dtype};
    const int64_t bytes = dtype_size(dy.dtype) + dtype_size(x.dtype) + dtype_size(dx.dtype);
    tiling_ = core::elementwise_op_tiling(dx.numel(), bytes, core::inner_is_contiguous(layout_),
                                          core::Platform::current());
    kernel_ = silu_backward_kernel(tiling_.isa);
    trace_.record(kOp, {{"gradOutput", &dy}, {"self", &x}, {"gradInput", &dx}}, tiling_);
  }

  void bind(const core::Operands& t) override {
    const TensorView &dy = t["gradOutput"], &x = t["self"], &dx = t["gradInput"];
    check_overlaps(dy, x, dx);
    const TensorView* ops[3] = {&dx, &dy, &x};
    core::bind_elementwise_layout(layout_, ops);
  }

  void run(void*) override {
    core::run_elementwise(layout_, tiling_.tiles,
                          [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtypes_, ptrs, n, streaming); });
  }

 private:
  core::ElementwiseLayout layout_;
  SiluDtypes dtypes_{};
  core::ElementwiseOpTiling tiling_;
  SiluSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec silu_backward_output_spec(const TensorView& grad_output, const TensorView& self) {
  return ops::validate_inputs(grad_output, self);
}

void silu_backward(const TensorView& grad_output, const TensorView& self, const TensorView& grad_input) {
  ops::SiluBackwardLaunch launch(grad_output, self, grad_input);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                        aclTensor* gradInput, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"gradOutput", "self"}, {"gradInput"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "gradOutput", gradOutput);
    core::require_not_null(ops::kOp, "self", self);
    core::require_not_null(ops::kOp, "gradInput", gradInput);
    return std::make_unique<ops::SiluBackwardLaunch>(t.view("gradOutput", gradOutput), t.view("self", self),
                                                     t.view("gradInput", gradInput));
  });
}

extern "C" aclnnStatus aclnnSiluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
