// aclnnGeGluV3Backward (and aclnnGeGluBackward, its activateLeft = false form): validation
// (ge_glu_backward.md, specification section 13), launch, native C++ API and C ABI. Elementwise over
// the halves with two outputs (the halves of gradInput).
#include <memory>
#include <utility>

#include "aclnnop/aclnn_geglu_backward.h"
#include "core/acl_tensor.h"
#include "core/elementwise.h"
#include "core/elementwise_op_tiling.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "core/view_halves.h"
#include "ops/activation/ge_glu/ge_glu_checks.h"
#include "ops/activation/ge_glu/ge_glu_kernel.h"
#include "tilegrad/ge_glu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kV1 = "aclnnGeGluBackward";
constexpr const char* kV3 = "aclnnGeGluV3Backward";

// Inputs alone (dtypes, then shapes: the vendor's order). Returns the normalized dim.
int validate_inputs(const char* op, const TensorView& dy, const TensorView& self, const TensorView& gelu,
                    int64_t dim) {
  core::require_well_formed(op, "gradOutput", dy);
  core::require_well_formed(op, "self", self);
  core::require_well_formed(op, "gelu", gelu);
  core::require_dtype(op, "gradOutput", dy, geglu::kFloatTypes);
  core::require_same_dtype(op, "self", self, "gradOutput", dy);
  core::require_same_dtype(op, "gelu", gelu, "gradOutput", dy);
  const int d = geglu::require_split(op, self, dim);
  const std::vector<int64_t> want = core::half_shape(self, d);
  geglu::require_half_shape(op, "gradOutput", dy, want, dim);
  geglu::require_half_shape(op, "gelu", gelu, want, dim);
  return d;
}

// The rules that depend on addresses: gradInput may be self itself (in place), never share memory
// with gradOutput or gelu.
void check_overlaps(const char* op, const TensorView& dy, const TensorView& self, const TensorView& gelu,
                    const TensorView& dx) {
  core::require_no_partial_overlap(op, "gradInput", dx, "gradOutput", dy, false);
  core::require_no_partial_overlap(op, "gradInput", dx, "gelu", gelu, false);
  core::require_no_partial_overlap(op, "gradInput", dx, "self", self, true);
}

int validate(const char* op, const TensorView& dy, const TensorView& self, const TensorView& gelu, int64_t dim,
             const TensorView& dx) {
  core::require_well_formed(op, "gradInput", dx);
  core::require_dtype(op, "gradOutput", dy, geglu::kFloatTypes);
  core::require_same_dtype(op, "self", self, "gradOutput", dy);  // every dtype before any shape
  core::require_same_dtype(op, "gelu", gelu, "gradOutput", dy);
  core::require_same_dtype(op, "gradInput", dx, "gradOutput", dy);
  const int d = validate_inputs(op, dy, self, gelu, dim);
  core::require_shape(op, "gradInput", dx, self.shape, "self shape");
  core::require_no_self_overlap(op, "gradInput", dx);
  check_overlaps(op, dy, self, gelu, dx);
  return d;
}

class GeGluBackwardLaunch final : public core::Launch {
 public:
  GeGluBackwardLaunch(const char* op, const TensorView& dy, const TensorView& self, const TensorView& gelu,
                      int64_t dim, int64_t approximate, bool activate_left, const TensorView& dx)
      : op_(op), dtype_(self.dtype), left_(activate_left) {
    d_ = validate(op_, dy, self, gelu, dim, dx);
    tanh_ = geglu::is_tanh(op_, approximate);
    bind_views(dy, self, gelu, dx, true);
    tiling_ = core::elementwise_op_tiling(dy.numel(), 6 * dtype_size(dtype_), core::inner_is_contiguous(layout_),
                            core::Platform::current());
    kernel_ = ge_glu_backward_kernel(tiling_.isa);
    trace_.record(op_, {{"gradOutput", &dy}, {"self", &self}, {"gelu", &gelu}, {"gradInput", &dx}}, tiling_);
    trace_.field("dim", dim);
    trace_.field("approximate", approximate);
    trace_.field("activate_left", activate_left);
  }

  void bind(const core::Operands& t) override {
    const TensorView &dy = t["gradOutput"], &self = t["self"], &gelu = t["gelu"], &dx = t["gradInput"];
    check_overlaps(op_, dy, self, gelu, dx);
    bind_views(dy, self, gelu, dx, false);
  }

  void run(void*) override {
    core::run_elementwise(
        layout_, tiling_.tiles,
        [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, tanh_, ptrs, n, streaming); }, 2);
  }

 private:
  // The kernel's operands {dh, dl, dy, h, l, gelu}: the activated and linear halves of self and of
  // gradInput (activateLeft picks the side). plan: build the layout; else rebind it.
  void bind_views(const TensorView& dy, const TensorView& self, const TensorView& gelu, const TensorView& dx,
                  bool plan) {
    auto [h, l] = core::split_halves(self, d_);
    auto [dh, dl] = core::split_halves(dx, d_);
    if (!left_) {
      std::swap(h, l);
      std::swap(dh, dl);
    }
    const TensorView* ops[6] = {&dh, &dl, &dy, &h, &l, &gelu};
    if (plan) layout_ = core::make_elementwise_layout(ops, 6);
    else core::bind_elementwise_layout(layout_, ops);
  }

  const char* op_;
  DType dtype_;
  bool left_;
  bool tanh_ = false;
  int d_ = 0;  // the normalized dim self and gradInput are split along
  core::ElementwiseLayout layout_;
  core::ElementwiseOpTiling tiling_;
  GeGluSpanFn kernel_ = nullptr;
};

aclnnStatus create(const char* op, const aclTensor* dy, const aclTensor* self, const aclTensor* gelu, int64_t dim,
                   int64_t approximate, bool activate_left, const aclTensor* dx, uint64_t* workspaceSize,
                   aclOpExecutor** executor) {
  return core::create_executor(op, {{"gradOutput", "self", "gelu"}, {"gradInput"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(op, "gradOutput", dy);
    core::require_not_null(op, "self", self);
    core::require_not_null(op, "gelu", gelu);
    core::require_not_null(op, "gradInput", dx);
    return std::make_unique<GeGluBackwardLaunch>(op, t.view("gradOutput", dy), t.view("self", self),
                                                 t.view("gelu", gelu), dim, approximate, activate_left,
                                                 t.view("gradInput", dx));
  });
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec ge_glu_backward_output_spec(const TensorView& grad_output, const TensorView& self, const TensorView& gelu,
                                       int64_t dim) {
  ops::validate_inputs(ops::kV3, grad_output, self, gelu, dim);
  return {self.dtype, self.shape};
}

void ge_glu_backward(const TensorView& grad_output, const TensorView& self, const TensorView& gelu, int64_t dim,
                     GeluApproximate approximate, bool activate_left, const TensorView& grad_input) {
  ops::GeGluBackwardLaunch launch(ops::kV3, grad_output, self, gelu, dim, static_cast<int64_t>(approximate),
                                  activate_left, grad_input);
  core::run_now(ops::kV3, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnGeGluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                          const aclTensor* gelu, int64_t dim, int64_t approximate,
                                                          aclTensor* gradInput, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor) {
  return ops::create(ops::kV1, gradOutput, self, gelu, dim, approximate, false, gradInput, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeGluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                          aclrtStream) {
  return core::launch_executor(ops::kV1, workspace, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeGluV3BackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                            const aclTensor* gelu, int64_t dim, int64_t approximate,
                                                            bool activateLeft, aclTensor* gradInput,
                                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
  return ops::create(ops::kV3, gradOutput, self, gelu, dim, approximate, activateLeft, gradInput, workspaceSize,
                     executor);
}

extern "C" aclnnStatus aclnnGeGluV3Backward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream) {
  return core::launch_executor(ops::kV3, workspace, workspaceSize, executor);
}
