// aclnnSwiGlu: validation (README.md), launch, native C++ API and C ABI.
#include <memory>

#include "aclnnop/aclnn_swi_glu.h"
#include "core/acl_tensor.h"
#include "core/elementwise.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/swi_glu/swi_glu_checks.h"
#include "ops/activation/swi_glu/swi_glu_halves.h"
#include "ops/activation/swi_glu/swi_glu_kernel.h"
#include "ops/activation/swi_glu/swi_glu_tiling.h"
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
  const std::vector<int64_t> want = swiglu::half_shape(x, d);
  swiglu::check_shape(out.shape == want, kOp, ": out shape must be x shape with dim ", dim, " halved ",
                      shape_str(want), ", got ", shape_str(out.shape));
  core::require_no_self_overlap(kOp, "out", out);
  check_overlaps(x, out);
  return d;
}

class SwiGluLaunch final : public core::Launch {
 public:
  SwiGluLaunch(const TensorView& x, int64_t dim, const TensorView& out) : dtype_(x.dtype) {
    d_ = validate(x, dim, out);
    const auto [a, b] = swiglu::halves(x, d_);
    const TensorView* ops[3] = {&out, &a, &b};
    layout_ = core::make_elementwise_layout(ops, 3);
    tiling_ = swi_glu_tiling(out.numel(), 3 * dtype_size(dtype_), core::inner_is_contiguous(layout_),
                             core::Platform::current());
    kernel_ = swi_glu_kernel(tiling_.isa);
    trace_.record(kOp, {{"x", &x}, {"out", &out}}, tiling_);
    trace_.field("dim", dim);
  }

  void bind(const core::Operands& t) override {
    const TensorView &x = t["x"], &out = t["out"];
    check_overlaps(x, out);
    const auto [a, b] = swiglu::halves(x, d_);
    const TensorView* ops[3] = {&out, &a, &b};
    core::bind_elementwise_layout(layout_, ops);
  }

  void run(void*) override {
    core::run_elementwise(layout_, tiling_.tiles,
                          [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, ptrs, n, streaming); });
  }

 private:
  DType dtype_;
  int d_ = 0;  // the normalized dim x is split along
  core::ElementwiseLayout layout_;
  SwiGluTiling tiling_;
  SwiGluSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec swi_glu_output_spec(const TensorView& x, int64_t dim) {
  const int d = ops::validate_inputs(x, dim);
  return {x.dtype, ops::swiglu::half_shape(x, d)};
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
