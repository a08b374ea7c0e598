// aclnnFusedLinearCrossEntropyLossGrad: validation (specification section 5), launch, native C++ API and C ABI.
#include <memory>
#include <vector>

#include "aclnnop/aclnn_fused_linear_cross_entropy_loss_grad.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/flce_checks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFusedLinearCrossEntropyLossGrad";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};

struct Args {
  TensorView grad, input, weight, mask, masked, max, sum, softmax, gin, gw;  // max, sum, softmax optional
};

void check_overlaps(const Args& a) {
  const bool hp = core::present(a.softmax);
  flce_check_overlaps(kOp, {{"inputGradOut", &a.gin}, {"weightGradOut", &a.gw}},
                      {{"grad", &a.grad},
                       {"input", &a.input},
                       {"weight", &a.weight},
                       {"targetMask", &a.mask},
                       {"maskedTarget", &a.masked},
                       {"logitsMaxOptional", hp ? nullptr : &a.max},
                       {"sumExpLogitsOptional", hp ? nullptr : &a.sum},
                       {"softmaxOptional", hp ? &a.softmax : nullptr}});
}

void validate(const Args& a, float label_smoothing) {
  const bool hp = core::present(a.softmax);
  core::require_well_formed(kOp, "grad", a.grad);
  core::require_well_formed(kOp, "input", a.input);
  core::require_well_formed(kOp, "weight", a.weight);
  core::require_well_formed(kOp, "targetMask", a.mask);
  core::require_well_formed(kOp, "maskedTarget", a.masked);
  core::require_well_formed(kOp, "inputGradOut", a.gin);
  core::require_well_formed(kOp, "weightGradOut", a.gw);
  if (hp) {
    core::require_well_formed(kOp, "softmaxOptional", a.softmax);
  } else {
    core::require_well_formed(kOp, "logitsMaxOptional", a.max);
    core::require_well_formed(kOp, "sumExpLogitsOptional", a.sum);
  }
  // dtypes
  core::require_dtype(kOp, "grad", a.grad, {DType::kFloat32});
  core::require_dtype(kOp, "input", a.input, kFloatTypes);
  core::require_same_dtype(kOp, "weight", a.weight, "input", a.input);
  core::require_dtype(kOp, "targetMask", a.mask, {DType::kUInt8, DType::kBool});
  core::require_dtype(kOp, "maskedTarget", a.masked, {DType::kInt32, DType::kInt64});
  if (hp) {
    core::require_dtype(kOp, "softmaxOptional", a.softmax, {DType::kFloat32});
  } else {
    core::require_dtype(kOp, "logitsMaxOptional", a.max, {DType::kFloat32});
    core::require_dtype(kOp, "sumExpLogitsOptional", a.sum, {DType::kFloat32});
  }
  core::require_same_dtype(kOp, "inputGradOut", a.gin, "input", a.input);
  core::require_same_dtype(kOp, "weightGradOut", a.gw, "input", a.input);
  // ranks
  core::require_rank(kOp, "grad", a.grad, 1, 1);
  core::require_rank(kOp, "input", a.input, 2, 2);
  core::require_rank(kOp, "weight", a.weight, 2, 2);
  core::require_rank(kOp, "targetMask", a.mask, 1, 1);
  core::require_rank(kOp, "maskedTarget", a.masked, 1, 1);
  if (hp) {
    core::require_rank(kOp, "softmaxOptional", a.softmax, 2, 2);
  } else {
    core::require_rank(kOp, "logitsMaxOptional", a.max, 1, 1);
    core::require_rank(kOp, "sumExpLogitsOptional", a.sum, 1, 1);
  }
  core::require_rank(kOp, "inputGradOut", a.gin, 2, 2);
  core::require_rank(kOp, "weightGradOut", a.gw, 2, 2);
  // shapes
  const int64_t bt = a.grad.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
  core::check(a.input.shape[0] == bt, kOp, ": input shape ", shape_str(a.input.shape), " must have BT = ", bt,
              " (grad length) rows");
  core::check(a.weight.shape[1] == h, kOp, ": weight shape ", shape_str(a.weight.shape),
              " must have input's hidden size ", h, " as dim 1");
  if (a.mask.dtype == DType::kBool)
    core::require_shape(kOp, "targetMask", a.mask, {bt}, "(BT) for a bool mask, BT from grad:");
  else
    core::check(a.mask.shape[0] * 8 >= bt, kOp, ": targetMask shape ", shape_str(a.mask.shape),
                " holds fewer than BT = ", bt, " bits (uint8 masks are bit-packed: length * 8 >= BT)");
  core::require_shape(kOp, "maskedTarget", a.masked, {bt}, "(BT) from grad:");
  if (hp) {
    core::require_shape(kOp, "softmaxOptional", a.softmax, {bt, v}, "(BT, V)");
  } else {
    core::require_shape(kOp, "logitsMaxOptional", a.max, {bt}, "(BT) from grad:");
    core::require_shape(kOp, "sumExpLogitsOptional", a.sum, {bt}, "(BT) from grad:");
  }
  core::require_shape(kOp, "inputGradOut", a.gin, {bt, h}, "(BT, H)");
  core::require_shape(kOp, "weightGradOut", a.gw, {v, h}, "(V, H)");
  core::check(label_smoothing == 0.0f, kOp, ": labelSmoothing must be 0, got ", label_smoothing);
  check_overlaps(a);
}

class LossGradLaunch final : public core::Launch {
 public:
  LossGradLaunch(const Args& a, float label_smoothing, int64_t budget) : a_(a) {
    validate(a_, label_smoothing);
    tiling_ = flce_grad_tiling(kOp, a.input.shape[0], a.input.shape[1], a.weight.shape[0], dtype_size(a.input.dtype),
                               !core::present(a.softmax), flce_gemmable(a.input), flce_gemmable(a.weight),
                               flce_gemmable(a.gin), flce_gemmable(a.gw), budget, core::Platform::current());
    trace_.record(kOp, {{"grad", &a_.grad}, {"input", &a_.input}, {"weight", &a_.weight}, {"targetMask", &a_.mask},
                        {"maskedTarget", &a_.masked}, {"logitsMaxOptional", &a_.max},
                        {"sumExpLogitsOptional", &a_.sum}, {"softmaxOptional", &a_.softmax},
                        {"inputGradOut", &a_.gin}, {"weightGradOut", &a_.gw}}, tiling_);
    core::trace_gemm(trace_, a_.input.dtype);
  }
  uint64_t workspace_bytes() const override { return tiling_.workspace_bytes; }

  void bind(const core::Operands& t) override {
    Args a = a_;
    t.bind({{"grad", &a.grad}, {"input", &a.input}, {"weight", &a.weight}, {"targetMask", &a.mask},
            {"maskedTarget", &a.masked}, {"logitsMaxOptional", &a.max}, {"sumExpLogitsOptional", &a.sum},
            {"softmaxOptional", &a.softmax}, {"inputGradOut", &a.gin}, {"weightGradOut", &a.gw}});
    check_overlaps(a);
    a_ = a;
  }

  void run(void* workspace) override {
    const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
    const bool hp = core::present(a_.softmax);
    std::vector<float> grad(bt), mx(hp ? 0 : bt), sum(hp ? 0 : bt);
    std::vector<int64_t> target(bt);
    const Vec1 g(a_.grad), mask(a_.mask), masked(a_.masked), vmax(a_.max), vsum(a_.sum);
    for (int64_t i = 0; i < bt; ++i) {
      const bool masked_out = a_.mask.dtype == DType::kBool ? mask.integer(i) != 0
                                                            : ((mask.integer(i / 8) >> (i % 8)) & 1) != 0;
      target[i] = -1;
      if (!masked_out) {
        const int64_t t = masked.integer(i);
        if (t < 0 || t >= v)
          core::fail_index(kOp, ": maskedTarget[", i, "] = ", t, " is out of range [0, ", v,
                           ") on a row whose targetMask bit is 0");
        target[i] = t;
      }
      grad[i] = g.f32(i);
      if (!hp) {
        mx[i] = vmax.f32(i);
        sum[i] = vsum.f32(i);
      }
    }
    flce_grad_run(tiling_, {a_.input, a_.weight, a_.gin, a_.gw}, hp ? &a_.softmax : nullptr,
                  {grad.data(), mx.data(), sum.data(), target.data()}, workspace);
  }

 private:
  Args a_;
  FlceGradTiling tiling_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void fused_linear_cross_entropy_loss_grad(const TensorView& grad, const TensorView& input, const TensorView& weight,
                                          const TensorView& target_mask, const TensorView& masked_target,
                                          float label_smoothing, const TensorView* logits_max,
                                          const TensorView* sum_exp_logits, const TensorView* softmax,
                                          const TensorView& grad_input, const TensorView& grad_weight) {
  if (!softmax && (!logits_max || !sum_exp_logits))
    core::fail(Status::kParamNullptr, ops::kOp,
               ": logitsMaxOptional and sumExpLogitsOptional are required when softmaxOptional is null");
  ops::Args a{grad,
              input,
              weight,
              target_mask,
              masked_target,
              logits_max ? *logits_max : TensorView{},
              sum_exp_logits ? *sum_exp_logits : TensorView{},
              softmax ? *softmax : TensorView{},
              grad_input,
              grad_weight};
  ops::LossGradLaunch launch(a, label_smoothing, ops::flce_budget());
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight, const aclTensor* targetMask,
    const aclTensor* maskedTarget, float labelSmoothing, const aclTensor* logitsMaxOptional,
    const aclTensor* sumExpLogitsOptional, const aclTensor* softmaxOptional, aclTensor* inputGradOut,
    aclTensor* weightGradOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = ops::kOp;
  const core::TensorParams params{{"grad", "input", "weight", "targetMask", "maskedTarget", "logitsMaxOptional",
                                   "sumExpLogitsOptional", "softmaxOptional"},
                                  {"inputGradOut", "weightGradOut"}};
  return core::create_executor(op, params, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    if (!softmaxOptional && (!logitsMaxOptional || !sumExpLogitsOptional))
      core::fail(Status::kParamNullptr, op,
                 ": logitsMaxOptional and sumExpLogitsOptional are required when softmaxOptional is null");
    core::require_not_null(op, "grad", grad);
    core::require_not_null(op, "input", input);
    core::require_not_null(op, "weight", weight);
    core::require_not_null(op, "targetMask", targetMask);
    core::require_not_null(op, "maskedTarget", maskedTarget);
    core::require_not_null(op, "inputGradOut", inputGradOut);
    core::require_not_null(op, "weightGradOut", weightGradOut);
    const bool hp = softmaxOptional != nullptr;
    ops::Args a{t.view("grad", grad),
                t.view("input", input),
                t.view("weight", weight),
                t.view("targetMask", targetMask),
                t.view("maskedTarget", maskedTarget),
                hp ? TensorView{} : t.view("logitsMaxOptional", logitsMaxOptional),
                hp ? TensorView{} : t.view("sumExpLogitsOptional", sumExpLogitsOptional),
                t.optional_view("softmaxOptional", softmaxOptional),
                t.view("inputGradOut", inputGradOut),
                t.view("weightGradOut", weightGradOut)};
    return std::make_unique<ops::LossGradLaunch>(a, labelSmoothing, ops::flce_budget());
  });
}

extern "C" aclnnStatus aclnnFusedLinearCrossEntropyLossGrad(void* workspace, uint64_t workspaceSize,
                                                            aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
