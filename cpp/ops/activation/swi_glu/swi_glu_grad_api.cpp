// aclnnSwiGluGrad: validation (README.md), launch, native C++ API and C ABI. Elementwise over the
// halves with two outputs (the halves of out), run by the family's launch (swi_glu_launch.h).
#include <memory>
#include <vector>

#include "aclnnop/aclnn_swi_glu_grad.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "core/view_halves.h"
#include "ops/activation/swi_glu/swi_glu_checks.h"
#include "ops/activation/swi_glu/swi_glu_grad_kernel.h"
#include "ops/activation/swi_glu/swi_glu_launch.h"
#include "tilegrad/swi_glu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnSwiGluGrad";

// Inputs alone (the vendor's 950 checks). Returns the normalized dim.
int validate_inputs(const TensorView& dy, const TensorView& x, int64_t dim) {
  core::require_well_formed(kOp, "yGrad", dy);
  core::require_well_formed(kOp, "x", x);
  core::require_dtype(kOp, "yGrad", dy, swiglu::kFloatTypes);
  core::require_same_dtype(kOp, "x", x, "yGrad", dy);
  const int d = swiglu::require_split(kOp, "x", x, dim);
  const std::vector<int64_t> want = core::half_shape(x, d);
  swiglu::check_shape(dy.shape == want, kOp, ": yGrad shape must be x shape with dim ", dim, " halved ",
                      shape_str(want), ", got ", shape_str(dy.shape));
  return d;
}

// The rules that depend on addresses: out may be x itself (in place), never share memory with yGrad.
void check_overlaps(const TensorView& dy, const TensorView& x, const TensorView& out) {
  core::require_no_partial_overlap(kOp, "out", out, "yGrad", dy, false);
  core::require_no_partial_overlap(kOp, "out", out, "x", x, true);
}

int validate(const TensorView& dy, const TensorView& x, int64_t dim, const TensorView& out) {
  core::require_well_formed(kOp, "out", out);
  core::require_dtype(kOp, "yGrad", dy, swiglu::kFloatTypes);
  core::require_same_dtype(kOp, "x", x, "yGrad", dy);
  core::require_same_dtype(kOp, "out", out, "x", x);
  const int d = validate_inputs(dy, x, dim);
  swiglu::check_shape(out.shape == x.shape, kOp, ": out shape must equal x shape ", shape_str(x.shape), ", got ",
                      shape_str(out.shape));
  core::require_no_self_overlap(kOp, "out", out);
  check_overlaps(dy, x, out);
  return d;
}

// The kernel's operands {da, db, dy, a, b}: the halves of out and of x along d, around dy.
std::vector<TensorView> operands(const TensorView& dy, const TensorView& x, int d, const TensorView& out) {
  const auto [a, b] = core::split_halves(x, d);
  const auto [da, db] = core::split_halves(out, d);
  return {da, db, dy, a, b};
}

class SwiGluGradLaunch final : public SwiGluSpansLaunch {
 public:
  SwiGluGradLaunch(const TensorView& dy, const TensorView& x, int64_t dim, const TensorView& out)
      : SwiGluGradLaunch(dy, x, dim, out, validate(dy, x, dim, out)) {}

  void bind(const core::Operands& t) override {
    const TensorView &dy = t["yGrad"], &x = t["x"], &out = t["out"];
    check_overlaps(dy, x, out);
    rebind(operands(dy, x, d_, out));
  }

 private:
  // d: the normalized dim x and out are split along (validate's result).
  SwiGluGradLaunch(const TensorView& dy, const TensorView& x, int64_t dim, const TensorView& out, int d)
      : SwiGluSpansLaunch(operands(dy, x, d, out), 2, swi_glu_grad_kernel), d_(d) {
    record(kOp, {{"yGrad", &dy}, {"x", &x}, {"out", &out}}, dim);
  }

  int d_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec swi_glu_grad_output_spec(const TensorView& y_grad, const TensorView& x, int64_t dim) {
  ops::validate_inputs(y_grad, x, dim);
  return {x.dtype, x.shape};
}

void swi_glu_grad(const TensorView& y_grad, const TensorView& x, int64_t dim, const TensorView& out) {
  ops::SwiGluGradLaunch launch(y_grad, x, dim, out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                                       const aclTensor* out, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"yGrad", "x"}, {"out"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "yGrad", yGrad);
    core::require_not_null(ops::kOp, "x", x);
    core::require_not_null(ops::kOp, "out", out);
    return std::make_unique<ops::SwiGluGradLaunch>(t.view("yGrad", yGrad), t.view("x", x), dim, t.view("out", out));
  });
}

extern "C" aclnnStatus aclnnSwiGluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
