// aclnnGeGluV3 (and aclnnGeGlu, its activateLeft = false form): validation (README.md, specification
// section 13), launch, native C++ API and C ABI.
#include <memory>
#include <utility>

#include "aclnnop/aclnn_geglu.h"
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

constexpr const char* kV1 = "aclnnGeGlu";
constexpr const char* kV3 = "aclnnGeGluV3";

// self and dim alone. Returns the normalized dim.
int validate_inputs(const char* op, const TensorView& self, int64_t dim) {
  core::require_well_formed(op, "self", self);
  core::require_dtype(op, "self", self, geglu::kFloatTypes);
  return geglu::require_split(op, self, dim);
}

// The rules that depend on addresses: the outputs share no memory with self or each other.
void check_overlaps(const char* op, const TensorView& self, const TensorView& out, const TensorView& out_gelu) {
  core::require_no_partial_overlap(op, "out", out, "self", self, false);
  core::require_no_partial_overlap(op, "outGelu", out_gelu, "self", self, false);
  core::require_no_partial_overlap(op, "outGelu", out_gelu, "out", out, false);
}

// The vendor's order: dtypes of all three, then ranks, dim, the even split, the output shapes.
int validate(const char* op, const TensorView& self, int64_t dim, const TensorView& out, const TensorView& out_gelu) {
  core::require_well_formed(op, "self", self);
  core::require_well_formed(op, "out", out);
  core::require_well_formed(op, "outGelu", out_gelu);
  core::require_dtype(op, "self", self, geglu::kFloatTypes);
  core::require_same_dtype(op, "out", out, "self", self);
  core::require_same_dtype(op, "outGelu", out_gelu, "self", self);
  const int d = validate_inputs(op, self, dim);
  const std::vector<int64_t> want = core::half_shape(self, d);
  geglu::require_half_shape(op, "out", out, want, dim);
  geglu::require_half_shape(op, "outGelu", out_gelu, want, dim);
  core::require_no_self_overlap(op, "out", out);
  core::require_no_self_overlap(op, "outGelu", out_gelu);
  check_overlaps(op, self, out, out_gelu);
  return d;
}

class GeGluLaunch final : public core::Launch {
 public:
  GeGluLaunch(const char* op, const TensorView& self, int64_t dim, int64_t approximate, bool activate_left,
              const TensorView& out, const TensorView& out_gelu)
      : op_(op), dtype_(self.dtype), left_(activate_left) {
    d_ = validate(op_, self, dim, out, out_gelu);
    tanh_ = geglu::is_tanh(op_, approximate);
    const auto [h, l] = activated_linear(self);
    const TensorView* ops[4] = {&out, &out_gelu, &h, &l};
    layout_ = core::make_elementwise_layout(ops, 4);
    tiling_ = core::elementwise_op_tiling(out.numel(), 4 * dtype_size(dtype_), core::inner_is_contiguous(layout_),
                            core::Platform::current());
    kernel_ = ge_glu_kernel(tiling_.isa);
    trace_.record(op_, {{"self", &self}, {"out", &out}, {"outGelu", &out_gelu}}, tiling_);
    trace_.field("dim", dim);
    trace_.field("approximate", approximate);
    trace_.field("activate_left", activate_left);
  }

  void bind(const core::Operands& t) override {
    const TensorView &self = t["self"], &out = t["out"], &out_gelu = t["outGelu"];
    check_overlaps(op_, self, out, out_gelu);
    const auto [h, l] = activated_linear(self);
    const TensorView* ops[4] = {&out, &out_gelu, &h, &l};
    core::bind_elementwise_layout(layout_, ops);
  }

  void run(void*) override {
    core::run_elementwise(
        layout_, tiling_.tiles,
        [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, tanh_, ptrs, n, streaming); }, 2);
  }

 private:
  // (activated half, linear half) of self.
  std::pair<TensorView, TensorView> activated_linear(const TensorView& self) const {
    const auto [a, b] = core::split_halves(self, d_);
    return left_ ? std::pair{a, b} : std::pair{b, a};
  }

  const char* op_;
  DType dtype_;
  bool left_;
  bool tanh_ = false;
  int d_ = 0;  // the normalized dim self is split along
  core::ElementwiseLayout layout_;
  core::ElementwiseOpTiling tiling_;
  GeGluSpanFn kernel_ = nullptr;
};

aclnnStatus create(const char* op, const aclTensor* self, int64_t dim, int64_t approximate, bool activate_left,
                   const aclTensor* out, const aclTensor* out_gelu, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(op, {{"self"}, {"out", "outGelu"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(op, "self", self);
    core::require_not_null(op, "out", out);
    core::require_not_null(op, "outGelu", out_gelu);
    return std::make_unique<GeGluLaunch>(op, t.view("self", self), dim, approximate, activate_left,
                                         t.view("out", out), t.view("outGelu", out_gelu));
  });
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec ge_glu_output_spec(const TensorView& self, int64_t dim) {
  const int d = ops::validate_inputs(ops::kV3, self, dim);
  return {self.dtype, core::half_shape(self, d)};
}

void ge_glu(const TensorView& self, int64_t dim, GeluApproximate approximate, bool activate_left,
            const TensorView& out, const TensorView& out_gelu) {
  ops::GeGluLaunch launch(ops::kV3, self, dim, static_cast<int64_t>(approximate), activate_left, out, out_gelu);
  core::run_now(ops::kV3, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnGeGluGetWorkspaceSize(const aclTensor* self, int64_t dim, int64_t approximate,
                                                  aclTensor* out, aclTensor* outGelu, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
  return ops::create(ops::kV1, self, dim, approximate, false, out, outGelu, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeGlu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kV1, workspace, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeGluV3GetWorkspaceSize(const aclTensor* self, int64_t dim, int64_t approximate,
                                                    bool activateLeft, aclTensor* out, aclTensor* outGelu,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return ops::create(ops::kV3, self, dim, approximate, activateLeft, out, outGelu, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeGluV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kV3, workspace, workspaceSize, executor);
}
