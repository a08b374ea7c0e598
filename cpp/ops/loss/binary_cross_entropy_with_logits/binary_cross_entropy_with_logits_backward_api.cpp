// aclnnBinaryCrossEntropyWithLogitsBackward: launch, native C++ API and C ABI; the validation
// (specification section 2) is the family's, bce_checks.h.
#include <memory>
#include <vector>

#include "aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h"
#include "core/dtype.h"
#include "core/elementwise.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/reduction.h"
#include "core/tensor.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_checks.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_operand.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_kernel.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_tiling.h"
#include "tilegrad/binary_cross_entropy_with_logits_backward.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnBinaryCrossEntropyWithLogitsBackward";

class BceBackwardLaunch final : public core::Launch {
 public:
  BceBackwardLaunch(const TensorView& dy, const TensorView& x, const TensorView& t, const TensorView* w,
                    const TensorView* pw, const core::ReductionArg& reduction, const TensorView& out)
      : dy_(dy), w_(w ? *w : TensorView{}), pw_(pw ? *pw : TensorView{}) {
    bce_validate(kOp, {&dy, x, t, w, pw, &out}, &reduction, BceOutShape::kSelf);
    const int64_t numel = x.numel();
    // Operands broadcast from one element are read once per launch and folded into constants;
    // the others join the broadcast layout in the order the kernel expects.
    variant_.out = out.dtype;
    variant_.self = x.dtype;
    variant_.target = t.dtype;
    variant_.grad_output = bce_operand(&dy, numel);
    variant_.weight = bce_operand(w, numel);
    variant_.pos_weight = bce_operand(pw, numel);
    variant_.grad_output_dtype = dy.dtype;
    if (w) variant_.weight_dtype = w->dtype;
    if (pw) variant_.pos_weight_dtype = pw->dtype;

    const TensorView* ops[core::kMaxOperands];
    const int nops = layout_operands(dy, x, t, w, pw, out, ops);
    int64_t bytes = dtype_size(out.dtype) + dtype_size(x.dtype) + dtype_size(t.dtype);
    for (int k = 1; k < nops; ++k) {
      params_.inputs[k - 1] = ops[k]->dtype;
      if (k >= 3 && ops[k]->numel() == numel) bytes += dtype_size(ops[k]->dtype);  // broadcast ones stay in cache
    }
    layout_ = core::make_elementwise_layout(ops, nops);
    tiling_ = bce_backward_tiling(numel, bytes, core::inner_is_contiguous(layout_),
                                  static_cast<int64_t>(reduction.value), core::Platform::current());
    kernel_ = bce_backward_kernel(tiling_.isa, variant_);
    trace_.record(kOp, {{"gradOutput", &dy}, {"self", &x}, {"target", &t}, {"weightOptional", w},
                        {"posWeightOptional", pw}, {"out", &out}}, tiling_);
  }

  void bind(const core::Operands& a) override {
    const TensorView &dy = a["gradOutput"], &x = a["self"], &t = a["target"], &out = a["out"];
    const TensorView *w = bce_optional(a["weightOptional"]), *pw = bce_optional(a["posWeightOptional"]);
    bce_check_overlaps(kOp, {&dy, x, t, w, pw, &out});
    const TensorView* ops[core::kMaxOperands];
    layout_operands(dy, x, t, w, pw, out, ops);
    core::bind_elementwise_layout(layout_, ops);
    dy_ = dy;
    w_ = w ? *w : TensorView{};
    pw_ = pw ? *pw : TensorView{};
  }

  void run(void*) override {
    const core::ElementwiseTiling& t = tiling_.tiles;
    if (t.num_tiles == 0) return;
    // Scalars are read at launch time (the C ABI may fill the tensors after phase 1).
    BceSpanParams p = params_;
    float factor = 1.0f;
    if (variant_.grad_output == BceOperand::kScalar) factor *= bce_read_one(dy_);
    if (variant_.weight == BceOperand::kScalar) factor *= bce_read_one(w_);
    p.factor = factor * tiling_.scale;
    if (variant_.pos_weight == BceOperand::kScalar) p.pos_weight = bce_read_one(pw_);
    core::run_elementwise(layout_, t, [&](char* const* ptrs, int64_t n, bool stream) { kernel_(p, ptrs, n, stream); });
  }

 private:
  // The elementwise layout's operands into ops (returns how many), in the kernel's order: out, self,
  // target, then gradOutput, weight and posWeight where read per element.
  int layout_operands(const TensorView& dy, const TensorView& x, const TensorView& t, const TensorView* w,
                      const TensorView* pw, const TensorView& out, const TensorView** ops) const {
    int n = 0;
    for (const TensorView* v : {&out, &x, &t}) ops[n++] = v;
    if (variant_.grad_output == BceOperand::kVector) ops[n++] = &dy;
    if (variant_.weight == BceOperand::kVector) ops[n++] = w;
    if (variant_.pos_weight == BceOperand::kVector) ops[n++] = pw;
    return n;
  }

  TensorView dy_, w_, pw_;  // kept for the one-element (kScalar) reads
  BceVariant variant_;
  BceSpanParams params_;
  core::ElementwiseLayout layout_;
  BceBackwardTiling tiling_;
  BceSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec binary_cross_entropy_with_logits_backward_output_spec(const TensorView& grad_output,
                                                                 const TensorView& self, const TensorView& target,
                                                                 const TensorView& weight,
                                                                 const TensorView& pos_weight) {
  ops::bce_validate(ops::kOp,
                    {&grad_output, self, target, ops::bce_optional(weight), ops::bce_optional(pos_weight), nullptr},
                    nullptr, ops::BceOutShape::kSelf);
  return {target.dtype, self.shape};
}

void binary_cross_entropy_with_logits_backward(const TensorView& grad_output, const TensorView& self,
                                               const TensorView& target, const TensorView& weight,
                                               const TensorView& pos_weight, Reduction reduction,
                                               const TensorView& out) {
  ops::BceBackwardLaunch launch(grad_output, self, target, ops::bce_optional(weight), ops::bce_optional(pos_weight),
                                core::reduction_arg(reduction), out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target, const aclTensor* weightOptional,
    const aclTensor* posWeightOptional, int64_t reduction, aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return core::create_executor(
      ops::kOp, {{"gradOutput", "self", "target", "weightOptional", "posWeightOptional"}, {"out"}}, workspaceSize,
      executor, [&](core::ExecutorTensors& tensors) {
    const core::ReductionArg r = core::reduction_from_code(reduction);
    const ops::BceAclViews v = ops::bce_views_of(
        ops::kOp, {gradOutput, self, target, weightOptional, posWeightOptional, out}, /*with_grad_output=*/true,
        tensors);
    return std::make_unique<ops::BceBackwardLaunch>(v.grad_output, v.self, v.target, v.weight_or_null(),
                                                    v.pos_weight_or_null(), r, v.out);
  });
}

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackward(void* workspace, uint64_t workspaceSize,
                                                                 aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
