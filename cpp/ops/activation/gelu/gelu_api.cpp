// aclnnGelu (the tanh form) and aclnnGeluV2 (erf or tanh): validation (README.md, specification
// section 12), launch, native C++ API and C ABI.
#include <memory>

#include "aclnnop/aclnn_gelu.h"
#include "aclnnop/aclnn_gelu_v2.h"
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

// The operator and its tensor parameters' names: aclnnGelu(self, out), aclnnGeluV2(x, y).
struct GeluNames {
  const char* op;
  const char* in;
  const char* out;
  const char* in_shape;  // "<in> shape", the rule the output's shape follows
};
constexpr GeluNames kV1{"aclnnGelu", "self", "out", "self shape"};
constexpr GeluNames kV2{"aclnnGeluV2", "x", "y", "x shape"};

// The rule that depends on addresses: the output may be the input itself (in place), nothing else.
void check_overlaps(const GeluNames& n, const TensorView& x, const TensorView& out) {
  core::require_no_partial_overlap(n.op, n.out, out, n.in, x, true);
}

void validate(const GeluNames& n, const TensorView& x, const TensorView& out) {
  core::require_well_formed(n.op, n.in, x);
  core::require_well_formed(n.op, n.out, out);
  core::require_dtype(n.op, n.in, x, gelu_checks::kFloatTypes);
  core::require_same_dtype(n.op, n.out, out, n.in, x);
  core::require_rank_at_most(n.op, n.in, x);
  core::require_shape(n.op, n.out, out, x.shape, n.in_shape);
  core::require_no_self_overlap(n.op, n.out, out);
  check_overlaps(n, x, out);
}

class GeluLaunch final : public core::Launch {
 public:
  // approximate: the vendor's code (0 erf, 1 tanh), checked after the tensors.
  GeluLaunch(const GeluNames& names, const TensorView& x, int64_t approximate, const TensorView& out)
      : names_(names), dtype_(x.dtype) {
    validate(names_, x, out);
    tanh_ = gelu_checks::is_tanh(names_.op, approximate);
    const TensorView* ops[2] = {&out, &x};
    layout_ = core::make_elementwise_layout(ops, 2);
    tiling_ = core::elementwise_op_tiling(out.numel(), 2 * dtype_size(dtype_), core::inner_is_contiguous(layout_),
                          core::Platform::current());
    kernel_ = gelu_kernel(tiling_.isa);
    trace_.record(names_.op, {{names_.in, &x}, {names_.out, &out}}, tiling_);
    trace_.field("approximate", approximate);
  }

  void bind(const core::Operands& t) override {
    const TensorView &x = t[names_.in], &out = t[names_.out];
    check_overlaps(names_, x, out);
    const TensorView* ops[2] = {&out, &x};
    core::bind_elementwise_layout(layout_, ops);
  }

  void run(void*) override {
    core::run_elementwise(layout_, tiling_.tiles,
                          [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, tanh_, ptrs, n, streaming); });
  }

 private:
  GeluNames names_;
  DType dtype_;
  bool tanh_ = false;
  core::ElementwiseLayout layout_;
  core::ElementwiseOpTiling tiling_;
  GeluSpanFn kernel_ = nullptr;
};

aclnnStatus create(const GeluNames& n, const aclTensor* x, int64_t approximate, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(n.op, {{n.in}, {n.out}}, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(n.op, n.in, x);
    core::require_not_null(n.op, n.out, out);
    return std::make_unique<GeluLaunch>(n, t.view(n.in, x), approximate, t.view(n.out, out));
  });
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void gelu(const TensorView& x, GeluApproximate approximate, const TensorView& out) {
  ops::GeluLaunch launch(ops::kV2, x, static_cast<int64_t>(approximate), out);
  core::run_now(ops::kV2.op, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  return ops::create(ops::kV1, self, static_cast<int64_t>(GeluApproximate::kTanh), out, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kV1.op, workspace, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor* x, int64_t approximate, aclTensor* y,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return ops::create(ops::kV2, x, approximate, y, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGeluV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kV2.op, workspace, workspaceSize, executor);
}
