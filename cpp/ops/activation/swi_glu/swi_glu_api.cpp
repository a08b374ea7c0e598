// aclnnSwiGlu: validation (README.md), launch, native C++ API and C ABI.
#include <memory>
#include <vector>

#include "aclnnop/aclnn_swi_glu.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "core/view_halves.h"
#include "ops/activation/swi_glu/swi_glu_checks.h"
#include "ops/activation/swi_glu/swi_glu_launch.h"
#include "tilegrad/swi_glu.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnSwiGlu";

// x and dim alone. Returns the normalized dim.
int validate_inputs(const TensorView& x, int64_t dim) {
  core::require_well_formed(kOp, "x", x);
  core::require_dtype(kOp, "x", x, swiglu::kFloatTypes);
  return swiglu::require_split(kOp, "x", x, dim);
}

// The rule that depends on addresses: out shares no memory with x.
void check_overlaps(const TensorView& x, const TensorView& out) {
  core::require_no_partial_overlap(kOp, "out", out, "x", x, false);
}

int validate(const TensorView& x, int64_t dim, const TensorView& out) {
  core::require_well_formed(kOp, "x", x);
  core::require_well_formed(kOp, "out", out);
  core::require_dtype(kOp, "x", x, swiglu::kFloatTypes);
  core::require_same_dtype(kOp, "out", out, "x", x);
  const int d = validate_inputs(x, dim);
  const std::vector<int64_t> want = core::half_shape(x, d);
  swiglu::check_shape(out.shape == want, kOp, ": out shape must be x shape with dim ", dim, " halved ",
                      shape_str(want), ", got ", shape_str(out.shape));
  core::require_no_self_overlap(kOp, "out", out);
  check_overlaps(x, out);
  return d;
}

// The kernel's operands {out, a, b}: out and the halves of x along d.
std::vector<TensorView> operands(const TensorView& x, int d, const TensorView& out) {
  const auto [a, b] = core::split_halves(x, d);
  return {out, a, b};
}

class SwiGluLaunch final : public SwiGluSpansLaunch {
 public:
  SwiGluLaunch(const TensorView& x, int64_t dim, const TensorView& out) : SwiGluLaunch(x, dim, out, validate(x, dim, out)) {}

  void bind(const core::Operands& t) override {
    const TensorView &x = t["x"], &out = t["out"];
    check_overlaps(x, out);
    rebind(operands(x, d_, out));
  }

 private:
  // d: the normalized dim x is split along (validate's result).
  SwiGluLaunch(const TensorView& x, int64_t dim, const TensorView& out, int d)
      : SwiGluSpansLaunch(operands(x, d, out), 1, swi_glu_kernel), d_(d) {
    record(kOp, {{"x", &x}, {"out", &out}}, dim);
  }

  int d_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec swi_glu_output_spec(const TensorView& x, int64_t dim) {
  const int d = ops::validate_inputs(x, dim);
  return {x.dtype, core::half_shape(x, d)};
}

void swi_glu(const TensorView& x, int64_t dim, const TensorView& out) {
  ops::SwiGluLaunch launch(x, dim, out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor* x, int64_t dim, const aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"x"}, {"out"}}, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "x", x);
    core::require_not_null(ops::kOp, "out", out);
    return std::make_unique<ops::SwiGluLaunch>(t.view("x", x), dim, t.view("out", out));
  });
}

extern "C" aclnnStatus aclnnSwiGlu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
