// aclnnApplyAdamWV2: validation in the vendor's order (README.md), native C++ API and C ABI. The
// update itself is the family's AdamW engine, adamw_engine.h (one slot).
#include <memory>

#include "aclnnop/aclnn_apply_adam_w_v2.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/optim/adamw/adamw_engine.h"
#include "tilegrad/adamw.hpp"

namespace tilegrad::ops::adamw {
namespace {

constexpr const char* kOp = "aclnnApplyAdamWV2";
const Names kNames{kOp, {"varRef", "grad", "mRef", "vRef", "maxGradNormOptionalRef", "param16"}, "step", false};
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// Vendor order: null (161001) -> each dtype on its own (no same-dtype rule) -> shapes -> step numel.
std::unique_ptr<AdamWLaunch> make_launch(Slot s, const AdamWOptions& h) {
  for (int k : {kParam, kExpAvg, kExpAvgSq, kGrad})
    if (!core::present(s.t[k])) core::fail(Status::kParamNullptr, kOp, ": ", kNames.operand[k], " must not be null, got null");
  if (!core::present(s.step)) core::fail(Status::kParamNullptr, kOp, ": step must not be null, got null");
  if (h.amsgrad && !core::present(s.t[kMaxExpAvgSq]))
    core::fail(Status::kParamNullptr, kOp, ": maxGradNormOptionalRef must be given when amsgrad is true, got null");
  if (!h.amsgrad) s.t[kMaxExpAvgSq] = TensorView{};  // optional and unused: not read, not written
  for (int k = 0; k < kParam16; ++k) {
    if (!core::present(s.t[k])) continue;
    core::require_well_formed(kOp, kNames.operand[k], s.t[k]);
    core::require_dtype(kOp, kNames.operand[k], s.t[k], kFloatTypes);
  }
  require_step(kNames, 0, s.step);
  core::require_rank_at_most(kOp, "varRef", s.t[kParam]);
  for (int k : {kExpAvg, kExpAvgSq, kGrad, kMaxExpAvgSq})
    if (core::present(s.t[k])) core::require_shape(kOp, kNames.operand[k], s.t[k], s.t[kParam].shape, "varRef shape");
  std::vector<Slot> slots{s};
  require_no_overlap(kNames, slots);
  return std::make_unique<AdamWLaunch>(kNames, std::move(slots), h, Extras{});
}

}  // namespace
}  // namespace tilegrad::ops::adamw

namespace tilegrad {

void apply_adam_w_v2(const TensorView& var, const TensorView& m, const TensorView& v, const TensorView& max_grad_norm,
                     const TensorView& grad, const TensorView& step, const AdamWOptions& options) {
  using namespace ops::adamw;
  Slot s;
  s.t[kParam] = var;
  s.t[kGrad] = grad;
  s.t[kExpAvg] = m;
  s.t[kExpAvgSq] = v;
  s.t[kMaxExpAvgSq] = max_grad_norm;
  s.step = step;
  std::unique_ptr<AdamWLaunch> launch = make_launch(s, options);
  core::run_now(kOp, *launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor* varRef, aclTensor* mRef, aclTensor* vRef,
                                                        aclTensor* maxGradNormOptionalRef, const aclTensor* grad,
                                                        const aclTensor* step, float lr, float beta1, float beta2,
                                                        float weightDecay, float eps, bool amsgrad, bool maximize,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  using namespace ops::adamw;
  // In place: the Ref tensors are inputs and outputs (aclSetInputTensorAddr / aclSetOutputTensorAddr give
  // them new addresses alike).
  const core::TensorParams params{{"varRef", "mRef", "vRef", "maxGradNormOptionalRef", "grad", "step"},
                                  {"varRef", "mRef", "vRef", "maxGradNormOptionalRef"}};
  return core::create_executor(kOp, params, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) -> std::unique_ptr<core::Launch> {
        core::require_not_null(kOp, "varRef", varRef);
        core::require_not_null(kOp, "mRef", mRef);
        core::require_not_null(kOp, "vRef", vRef);
        core::require_not_null(kOp, "grad", grad);
        core::require_not_null(kOp, "step", step);
        if (amsgrad) core::require_not_null(kOp, "maxGradNormOptionalRef", maxGradNormOptionalRef);
        Slot s;
        s.t[kParam] = t.view("varRef", varRef);
        s.t[kExpAvg] = t.view("mRef", mRef);
        s.t[kExpAvgSq] = t.view("vRef", vRef);
        s.t[kMaxExpAvgSq] = t.optional_view("maxGradNormOptionalRef", maxGradNormOptionalRef);
        s.t[kGrad] = t.view("grad", grad);
        s.step = t.view("step", step);
        const AdamWOptions h{lr, beta1, beta2, weightDecay, eps, amsgrad, maximize};
        return make_launch(s, h);
      });
}

extern "C" aclnnStatus aclnnApplyAdamWV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream) {
  return core::launch_executor(ops::adamw::kOp, workspace, workspaceSize, executor);
}
