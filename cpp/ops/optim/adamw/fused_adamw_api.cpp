// aclnnFusedAdamw: validation in the vendor's order (README.md), native C++ API and C ABI.
#include <cmath>
#include <memory>

#include "aclnnop/aclnn_fused_adamw.h"
#include "core/acl_objects.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/platform.h"
#include "core/tensor.h"
#include "ops/optim/adamw/adamw_engine.h"
#include "tilegrad/adamw.hpp"

namespace tilegrad::ops::adamw {
namespace {

constexpr const char* kOp = "aclnnFusedAdamw";
const Names kNames{kOp,
                   {"paramsRef", "grads", "expAvgsRef", "expAvgSqsRef", "maxExpAvgSqsRef", "modelParams"},
                   "stateSteps",
                   true,
                   "gradScaleOptional",
                   "foundInfOptional"};
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct Lists {
  const std::vector<TensorView>* l[kNumOperands];
  const std::vector<TensorView>* steps;
};

// 1. attributes (the vendor checks them first, before null pointers).
void check_attributes(const AdamWOptions& h, bool have_max) {
  core::check(h.lr >= 0, kOp, ": lr must be >= 0, got ", h.lr);
  core::check(h.beta1 >= 0, kOp, ": beta1 must be >= 0, got ", h.beta1);
  core::check(h.beta2 >= 0, kOp, ": beta2 must be >= 0, got ", h.beta2);
  core::check(h.weight_decay >= 0, kOp, ": weightDecay must be >= 0, got ", h.weight_decay);
  core::check(!h.amsgrad || have_max, kOp, ": maxExpAvgSqsRef must be given when amsgrad is true, got none");
}

// 2. null elements (161001), then 3. list lengths (161002).
void check_counts(const Lists& in) {
  for (int k = 0; k < kNumOperands; ++k) {
    if (!in.l[k]) continue;
    for (size_t i = 0; i < in.l[k]->size(); ++i)
      if (!core::present((*in.l[k])[i]))
        core::fail(Status::kParamNullptr, kOp, ": ", kNames.arg(k, i), " must not be null, got null");
  }
  for (size_t i = 0; i < in.steps->size(); ++i)
    if (!core::present((*in.steps)[i]))
      core::fail(Status::kParamNullptr, kOp, ": ", kNames.step_arg(i), " must not be null, got null");
  const size_t n = in.l[kParam]->size();
  core::check(n > 0, kOp, ": paramsRef must hold at least one tensor, got an empty list");
  auto require_len = [&](const char* arg, size_t len) {
    core::check(len == n, kOp, ": ", arg, " must hold one tensor per paramsRef tensor (", n, "), got ", len);
  };
  for (int k = kGrad; k < kNumOperands; ++k)
    if (in.l[k]) require_len(kNames.operand[k], in.l[k]->size());
  require_len(kNames.step, in.steps->size());
}

// 4. dtypes: one float dtype for every tensor (the vendor has no mixes); with modelParams (extension)
// params and moments float32, grads and modelParams one 16-bit dtype.
void check_dtypes(const Lists& in) {
  const std::vector<TensorView>& params = *in.l[kParam];
  core::require_dtype(kOp, kNames.arg(kParam, 0).c_str(), params[0], kFloatTypes);
  const bool master = in.l[kParam16] != nullptr;
  if (master) {
    core::require_dtype(kOp, kNames.arg(kParam, 0).c_str(), params[0], {DType::kFloat32});
    core::require_dtype(kOp, kNames.arg(kGrad, 0).c_str(), (*in.l[kGrad])[0], {DType::kFloat16, DType::kBFloat16});
  }
  for (int k = 0; k < kNumOperands; ++k) {
    if (!in.l[k]) continue;
    const bool low = master && (k == kGrad || k == kParam16);
    const TensorView& ref = low ? (*in.l[kGrad])[0] : params[0];
    const std::string ref_arg = kNames.arg(low ? kGrad : kParam, 0);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string arg = kNames.arg(k, i);
      core::require_well_formed(kOp, arg.c_str(), (*in.l[k])[i]);
      core::require_same_dtype(kOp, arg.c_str(), (*in.l[k])[i], ref_arg.c_str(), ref);
    }
  }
  const TensorView& step0 = (*in.steps)[0];
  for (size_t i = 0; i < in.steps->size(); ++i) {
    require_step(kNames, i, (*in.steps)[i]);
    core::require_same_dtype(kOp, kNames.step_arg(i).c_str(), (*in.steps)[i], kNames.step_arg(0).c_str(), step0);
  }
}

// 5. ranks and shapes: every list's tensor i has paramsRef[i]'s shape (maxExpAvgSqsRef included:
// the vendor only logs that mismatch).
void check_shapes(const Lists& in) {
  const std::vector<TensorView>& params = *in.l[kParam];
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string parg = kNames.arg(kParam, i);
    core::require_rank_at_most(kOp, parg.c_str(), params[i]);
    for (int k = kGrad; k < kNumOperands; ++k) {
      if (!in.l[k]) continue;
      core::require_shape(kOp, kNames.arg(k, i).c_str(), (*in.l[k])[i], params[i].shape, (parg + " shape").c_str());
    }
  }
}

std::vector<Slot> make_slots(const Lists& in) {
  std::vector<Slot> slots(in.l[kParam]->size());
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int k = 0; k < kNumOperands; ++k)
      if (in.l[k]) slots[i].t[k] = (*in.l[k])[i];
    slots[i].step = (*in.steps)[i];
  }
  return slots;
}

std::unique_ptr<AdamWLaunch> make_launch(const Lists& in, const AdamWOptions& h, const Extras& extras) {
  check_attributes(h, in.l[kMaxExpAvgSq] != nullptr);
  check_counts(in);
  check_dtypes(in);
  check_shapes(in);
  if (core::present(extras.grad_scale)) require_scalar_tensor(kOp, "gradScaleOptional", extras.grad_scale);
  if (core::present(extras.found_inf)) require_scalar_tensor(kOp, "foundInfOptional", extras.found_inf);
  core::check(std::isnan(extras.max_grad_norm) || extras.max_grad_norm >= 0, kOp,
              ": max_grad_norm must be >= 0, got ", extras.max_grad_norm);
  std::vector<Slot> slots = make_slots(in);
  require_no_overlap(kNames, slots);
  return std::make_unique<AdamWLaunch>(kNames, std::move(slots), h, extras);
}

// An empty scalar tensor is treated as absent (the vendor's rule for gradScale / foundInf).
TensorView absent_if_empty(const TensorView& t) { return core::present(t) && t.numel() == 0 ? TensorView{} : t; }

}  // namespace
}  // namespace tilegrad::ops::adamw

namespace tilegrad {

double fused_adamw(const std::vector<TensorView>& params, const std::vector<TensorView>& grads,
                   const std::vector<TensorView>& exp_avgs, const std::vector<TensorView>& exp_avg_sqs,
                   const std::vector<TensorView>& max_exp_avg_sqs, const std::vector<TensorView>& state_steps,
                   const AdamWOptions& options, const FusedAdamWExtras& extras) {
  using namespace ops::adamw;
  Lists in{{&params, &grads, &exp_avgs, &exp_avg_sqs, max_exp_avg_sqs.empty() ? nullptr : &max_exp_avg_sqs,
            extras.model_params.empty() ? nullptr : &extras.model_params},
           &state_steps};
  if (!options.amsgrad) in.l[kMaxExpAvgSq] = nullptr;  // given but unused: not read, not written
  Extras x{absent_if_empty(extras.grad_scale), absent_if_empty(extras.found_inf), extras.max_grad_norm,
           extras.grad_norm};
  std::unique_ptr<AdamWLaunch> launch = make_launch(in, options, x);
  core::run_now(kOp, *launch);
  return launch->grad_norm();
}

double adamw_grad_norm(const std::vector<TensorView>& grads) {
  using namespace ops::adamw;
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string arg = kNames.arg(kGrad, i);
    core::require_well_formed(kOp, arg.c_str(), grads[i]);
    core::require_dtype(kOp, arg.c_str(), grads[i], kFloatTypes);
  }
  const core::Platform p = core::Platform::current();
  return grad_norm(grads, p.threads, p.isa);
}

}  // namespace tilegrad

using namespace tilegrad;

namespace {

// The views of a C tensor list (null list: none; null elements: absent views, rejected later).
std::vector<TensorView> views_of(core::ExecutorTensors& tensors, const char* arg, const aclTensorList* list) {
  std::vector<TensorView> views;
  if (!list) return views;
  for (size_t i = 0; i < list->tensors.size(); ++i)
    views.push_back(tensors.optional_view(core::concat(arg, "[", i, "]"), list->tensors[i]));
  return views;
}

}  // namespace

extern "C" aclnnStatus aclnnFusedAdamwGetWorkspaceSize(
    const aclTensorList* paramsRef, const aclTensorList* grads, const aclTensorList* expAvgsRef,
    const aclTensorList* expAvgSqsRef, const aclTensorList* maxExpAvgSqsRef, const aclTensorList* stateSteps,
    const aclTensor* gradScaleOptional, const aclTensor* foundInfOptional, double lr, double beta1, double beta2,
    double weightDecay, double eps, bool amsgrad, bool maximize, uint64_t* workspaceSize, aclOpExecutor** executor) {
  using namespace ops::adamw;
  // In place: the Ref lists are inputs and outputs (aclSetDynamicInputTensorAddr / ...Output... give them
  // new addresses alike).
  const core::TensorParams params{{"paramsRef[]", "grads[]", "expAvgsRef[]", "expAvgSqsRef[]", "maxExpAvgSqsRef[]",
                                   "stateSteps[]", "gradScaleOptional", "foundInfOptional"},
                                  {"paramsRef[]", "expAvgsRef[]", "expAvgSqsRef[]", "maxExpAvgSqsRef[]"}};
  return core::create_executor(kOp, params, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) -> std::unique_ptr<core::Launch> {
    const AdamWOptions h{lr, beta1, beta2, weightDecay, eps, amsgrad, maximize};
    const bool have_max = maxExpAvgSqsRef && !maxExpAvgSqsRef->tensors.empty();
    check_attributes(h, have_max);
    core::require_not_null(kOp, "paramsRef", paramsRef);
    core::require_not_null(kOp, "grads", grads);
    core::require_not_null(kOp, "expAvgsRef", expAvgsRef);
    core::require_not_null(kOp, "expAvgSqsRef", expAvgSqsRef);
    core::require_not_null(kOp, "stateSteps", stateSteps);
    const std::vector<TensorView> p = views_of(t, "paramsRef", paramsRef), g = views_of(t, "grads", grads),
                                  m = views_of(t, "expAvgsRef", expAvgsRef),
                                  v = views_of(t, "expAvgSqsRef", expAvgSqsRef),
                                  mx = views_of(t, "maxExpAvgSqsRef", maxExpAvgSqsRef),
                                  s = views_of(t, "stateSteps", stateSteps);
    Lists in{{&p, &g, &m, &v, amsgrad && have_max ? &mx : nullptr, nullptr}, &s};
    Extras x{absent_if_empty(t.optional_view("gradScaleOptional", gradScaleOptional)),
             absent_if_empty(t.optional_view("foundInfOptional", foundInfOptional))};
    return make_launch(in, h, x);
  });
}

extern "C" aclnnStatus aclnnFusedAdamw(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream) {
  return core::launch_executor(ops::adamw::kOp, workspace, workspaceSize, executor);
}
