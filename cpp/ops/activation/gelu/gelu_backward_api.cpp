// aclnnGeluBackward (the tanh form) and aclnnGeluBackwardV2 ("none" | "tanh"): validation
// (gelu_backward.md, specification section 12), launch, native C++ API and C ABI.
#include <memory>

#include "aclnnop/aclnn_gelu_backward.h"
#include "aclnnop/aclnn_gelu_backward_v2.h"
#include "core/acl_tensor.h"
#include "core/elementwise.h"
#include "core/elementwise_op_tiling.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/gelu/gelu_checks.h"
#include "ops/activation/gelu/gelu_kernel.h"
#include "tilegrad/gelu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kV1 = "aclnnGeluBackward";
constexpr const char* kV2 = "aclnnGeluBackwardV2";

// Inputs alone: dtypes, ranks, broadcast. Returns the gradInput they call for.
OutputSpec validate_inputs(const char* op, const TensorView& dy, const TensorView& x) {
  core::require_well_formed(op, "gradOutput", dy);
  core::require_well_formed(op, "self", x);
  core::require_dtype(op, "gradOutput", dy, gelu_checks::kFloatTypes);
  core::require_dtype(op, "self", x, gelu_checks::kFloatTypes);
  core::require_rank_at_most(op, "gradOutput", dy);
  core::require_rank_at_most(op, "self", x);
  OutputSpec spec;
  spec.dtype = dy.dtype == x.dtype ? x.dtype : DType::kFloat32;
  spec.shape = core::broadcast_shapes(op, "gradOutput", dy.shape, "self", x.shape);
  return spec;
}

// The rules that depend on addresses: gradInput may alias an input exactly (in place), never partly.
void check_overlaps(const char* op, const TensorView& dy, const TensorView& x, const TensorView& dx) {
  core::require_no_partial_overlap(op, "gradInput", dx, "gradOutput", dy, true);
  core::require_no_partial_overlap(op, "gradInput", dx, "self", x, true);
}

void validate(const char* op, const TensorView& dy, const TensorView& x, const TensorView& dx) {
  core::require_well_formed(op, "gradInput", dx);
  core::require_dtype(op, "gradOutput", dy, gelu_checks::kFloatTypes);
  core::require_dtype(op, "self", x, gelu_checks::kFloatTypes);
  core::require_dtype(op, "gradInput", dx, gelu_checks::kFloatTypes);
  const OutputSpec spec = validate_inputs(op, dy, x);
  core::check(dx.dtype == spec.dtype, op, ": gradInput dtype must be ", dtype_name(spec.dtype),
              " (gradOutput ", dtype_name(dy.dtype), ", self ", dtype_name(x.dtype), "), got ", dtype_name(dx.dtype));
  core::require_rank_at_most(op, "gradInput", dx);
  core::check(dx.shape == spec.shape, op, ": gradInput shape ", shape_str(dx.shape), " != broadcast of gradOutput ",
              shape_str(dy.shape), " and self ", shape_str(x.shape), " = ", shape_str(spec.shape));
  core::require_no_self_overlap(op, "gradInput", dx);
  check_overlaps(op, dy, x, dx);
}

class GeluBackwardLaunch final : public core::Launch {
 public:
  // approximate(): the form, asked for after the tensors are checked (the vendor's order).
  template <class Approximate>
  GeluBackwardLaunch(const char* op, const TensorView& dy, const TensorView& x, Approximate&& approximate,
                     const TensorView& dx)
      : op_(op) {
    validate(op_, dy, x, dx);
    tanh_ = gelu_checks::is_tanh(op_, static_cast<int64_t>(approximate()));
    const TensorView* ops[3] = {&dx, &dy, &x};
    layout_ = core::make_elementwise_layout(ops, 3);
    dtypes_ = {dy.dtype, x.dtype, dx.dtype};
    const int64_t bytes = dtype_size(dy.dtype) + dtype_size(x.dtype) + dtype_size(dx.dtype);
    tiling_ = core::elementwise_op_tiling(dx.numel(), bytes, core::inner_is_contiguous(layout_), core::Platform::current());
    kernel_ = gelu_backward_kernel(tiling_.isa);
    trace_.record(op_, {{"gradOutput", &dy}, {"self", &x}, {"gradInput", &dx}}, tiling_);
    trace_.field("approximate", tanh_ ? "tanh" : "none");
  }

  void bind(const core::Operands& t) override {
    const TensorView &dy = t["gradOutput"], &x = t["self"], &dx = t["gradInput"];
    check_overlaps(op_, dy, x, dx);
    const TensorView* ops[3] = {&dx, &dy, &x};
    core::bind_elementwise_layout(layout_, ops);
  }

  void run(void*) override {
    core::run_elementwise(layout_, tiling_.tiles, [&](char* const* ptrs, int64_t n, bool streaming) {
      kernel_(dtypes_, tanh_, ptrs, n, streaming);
    });
  }

 private:
  const char* op_;
  bool tanh_ = false;
  core::ElementwiseLayout layout_;
  GeluGradDtypes dtypes_{};
  core::ElementwiseOpTiling tiling_;
  GeluGradSpanFn kernel_ = nullptr;
};

// Phase 1 of both versions. approximate: V2's string (null: 161001 with the tensors), or V1's
// nullptr with v1 set (the tanh form).
aclnnStatus create(const char* op, const aclTensor* dy, const aclTensor* x, const char* approximate, bool v1,
                   const aclTensor* dx, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(op, {{"gradOutput", "self"}, {"gradInput"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(op, "gradOutput", dy);
    core::require_not_null(op, "self", x);
    if (!v1) core::require_not_null(op, "approximate", approximate);
    core::require_not_null(op, "gradInput", dx);
    const auto form = [&] {
      return v1 ? GeluApproximate::kTanh : gelu_checks::approximate_from_name(op, approximate);
    };
    return std::make_unique<GeluBackwardLaunch>(op, t.view("gradOutput", dy), t.view("self", x), form,
                                                t.view("gradInput", dx));
  });
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec gelu_backward_output_spec(const TensorView& grad_output, const TensorView& self) {
  return ops::validate_inputs(ops::kV2, grad_output, self);
}

void gelu_backward(const TensorView& grad_output, const TensorView& self, GeluApproximate approximate,
                   const TensorView& grad_input) {
  ops::GeluBackwardLaunch launch(ops::kV2, grad_output, self, [&] { return approximate; }, grad_input);
  core::run_now(ops::kV2, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                         const aclTensor* gradInput, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor) {
  return ops::create(ops::kV1, gradOutput, self, nullptr, true, gradInput, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream) {
  return core::launch_executor(ops::kV1, workspace, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                           char* approximate, aclTensor* gradInput,
                                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return ops::create(ops::kV2, gradOutput, self, approximate, false, gradInput, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeluBackwardV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           aclrtStream) {
  return core::launch_executor(ops::kV2, workspace, workspaceSize, executor);
}
