// aclnnFusedCrossEntropyLossWithMaxSum: validation (specification section 5), launch, native C++ API and C ABI.
#include <cmath>
#include <memory>

#include "aclnnop/aclnn_fused_cross_entropy_loss_with_max_sum.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/platform.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/flce_checks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFusedCrossEntropyLossWithMaxSum";

struct Args {
  TensorView max, sum, pred, loss, logits, softmax;  // logits, softmax optional
};

void check_overlaps(const Args& a) {
  const bool has_logits = core::present(a.logits);
  flce_check_overlaps(kOp, {{"lossOut", &a.loss}, {"softMaxOutOptional", has_logits ? &a.softmax : nullptr}},
                      {{"logitsMax", &a.max},
                       {"sumExpLogits", &a.sum},
                       {"predictedLogits", &a.pred},
                       {"vocabParallelLogitsOptional", has_logits ? &a.logits : nullptr}});
}

void validate(const Args& a, float label_smoothing) {
  core::require_well_formed(kOp, "logitsMax", a.max);
  core::require_well_formed(kOp, "sumExpLogits", a.sum);
  core::require_well_formed(kOp, "predictedLogits", a.pred);
  core::require_well_formed(kOp, "lossOut", a.loss);
  const bool has_logits = core::present(a.logits);
  if (has_logits) {
    core::require_well_formed(kOp, "vocabParallelLogitsOptional", a.logits);
    core::require_well_formed(kOp, "softMaxOutOptional", a.softmax);
  }
  core::require_dtype(kOp, "logitsMax", a.max, {DType::kFloat32});
  core::require_dtype(kOp, "sumExpLogits", a.sum, {DType::kFloat32});
  core::require_dtype(kOp, "predictedLogits", a.pred, {DType::kFloat32});
  core::require_dtype(kOp, "lossOut", a.loss, {DType::kFloat32});
  if (has_logits) {
    core::require_dtype(kOp, "vocabParallelLogitsOptional", a.logits,
                        {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
    core::require_dtype(kOp, "softMaxOutOptional", a.softmax, {DType::kFloat32});
  }
  core::require_rank(kOp, "logitsMax", a.max, 1, 1);
  core::require_rank(kOp, "sumExpLogits", a.sum, 1, 1);
  core::require_rank(kOp, "predictedLogits", a.pred, 1, 1);
  core::require_rank(kOp, "lossOut", a.loss, 1, 1);
  if (has_logits) {
    core::require_rank(kOp, "vocabParallelLogitsOptional", a.logits, 2, 2);
    core::require_rank(kOp, "softMaxOutOptional", a.softmax, 2, 2);
  }
  const int64_t bt = a.max.shape[0];
  core::require_shape(kOp, "sumExpLogits", a.sum, {bt}, "logitsMax shape");
  core::require_shape(kOp, "predictedLogits", a.pred, {bt}, "logitsMax shape");
  core::require_shape(kOp, "lossOut", a.loss, {bt}, "logitsMax shape");
  if (has_logits) {
    core::check(a.logits.shape[0] == bt, kOp, ": vocabParallelLogitsOptional shape ", shape_str(a.logits.shape),
                " must have BT = ", bt, " rows");
    core::require_shape(kOp, "softMaxOutOptional", a.softmax, a.logits.shape, "vocabParallelLogitsOptional shape");
  }
  core::check(label_smoothing == 0.0f, kOp, ": labelSmoothing must be 0, got ", label_smoothing);
  check_overlaps(a);
}

class LossWithMaxSumLaunch final : public core::Launch {
 public:
  LossWithMaxSumLaunch(const Args& a, float label_smoothing) : a_(a) {
    validate(a_, label_smoothing);
    platform_ = core::Platform::current();
    trace_.record(kOp, {{"logitsMax", &a_.max}, {"sumExpLogits", &a_.sum}, {"predictedLogits", &a_.pred},
                        {"vocabParallelLogitsOptional", &a_.logits}, {"lossOut", &a_.loss},
                        {"softMaxOutOptional", &a_.softmax}});
  }

  void bind(const core::Operands& t) override {
    Args a = a_;
    t.bind({{"logitsMax", &a.max}, {"sumExpLogits", &a.sum}, {"predictedLogits", &a.pred}, {"lossOut", &a.loss},
            {"vocabParallelLogitsOptional", &a.logits}, {"softMaxOutOptional", &a.softmax}});
    check_overlaps(a);
    a_ = a;
  }

  void run(void*) override {
    const int64_t bt = a_.max.shape[0];
    const Vec1 mx(a_.max), sum(a_.sum), pred(a_.pred), loss(a_.loss);
    for (int64_t i = 0; i < bt; ++i) loss.set_f32(i, std::log(sum.f32(i)) - pred.f32(i));
    if (!core::present(a_.logits) || bt == 0 || a_.logits.shape[1] == 0) return;
    const FlceKernels* k = flce_kernels(platform_.isa);
    const int64_t v = a_.logits.shape[1];
    const int64_t es = dtype_size(a_.logits.dtype);
    const TensorView& x = a_.logits;
    const TensorView& y = a_.softmax;
    const int threads = platform_.threads;
    const int64_t tiles = std::max<int64_t>(1, std::min<int64_t>(bt, int64_t(threads) * 4));
    const int64_t per = (bt + tiles - 1) / tiles;
    core::parallel_for(tiles, threads, [&](int64_t tile) {
      for (int64_t i = tile * per; i < std::min(bt, (tile + 1) * per); ++i)
        k->softmax_row(x.dtype, static_cast<const char*>(x.data) + i * x.strides[0] * es, x.strides[1], v,
                       mx.f32(i), sum.f32(i), static_cast<float*>(y.data) + i * y.strides[0], y.strides[1]);
    });
  }

 private:
  Args a_;
  core::Platform platform_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void fused_cross_entropy_loss_with_max_sum(const TensorView& logits_max, const TensorView& sum_exp_logits,
                                           const TensorView& predicted_logits, float label_smoothing,
                                           const TensorView& loss, const TensorView* logits,
                                           const TensorView* softmax) {
  if (logits && !softmax)
    core::fail(Status::kParamNullptr, ops::kOp, ": softMaxOutOptional is required when vocabParallelLogitsOptional is given");
  ops::Args a{logits_max, sum_exp_logits, predicted_logits, loss, logits ? *logits : TensorView{},
              logits ? *softmax : TensorView{}};
  ops::LossWithMaxSumLaunch launch(a, label_smoothing);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize(
    const aclTensor* logitsMax, const aclTensor* sumExpLogits, const aclTensor* predictedLogits, float labelSmoothing,
    const aclTensor* inputOptional, const aclTensor* weightOptional, const aclTensor* vocabParallelLogitsOptional,
    aclTensor* lossOut, aclTensor* softMaxOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = ops::kOp;
  (void)inputOptional;  // accepted for the vendor signature; not used by the computation
  (void)weightOptional;
  const core::TensorParams params{{"logitsMax", "sumExpLogits", "predictedLogits", "inputOptional", "weightOptional",
                                   "vocabParallelLogitsOptional"},
                                  {"lossOut", "softMaxOutOptional"}};
  return core::create_executor(op, params, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(op, "logitsMax", logitsMax);
    core::require_not_null(op, "sumExpLogits", sumExpLogits);
    core::require_not_null(op, "predictedLogits", predictedLogits);
    core::require_not_null(op, "lossOut", lossOut);
    if (vocabParallelLogitsOptional && !softMaxOutOptional)
      core::fail(Status::kParamNullptr, op,
                 ": softMaxOutOptional is required when vocabParallelLogitsOptional is given");
    const bool has_logits = vocabParallelLogitsOptional != nullptr;
    ops::Args a{t.view("logitsMax", logitsMax),
                t.view("sumExpLogits", sumExpLogits),
                t.view("predictedLogits", predictedLogits),
                t.view("lossOut", lossOut),
                t.optional_view("vocabParallelLogitsOptional", vocabParallelLogitsOptional),
                has_logits ? t.view("softMaxOutOptional", softMaxOutOptional) : TensorView{}};
    return std::make_unique<ops::LossWithMaxSumLaunch>(a, labelSmoothing);
  });
}

extern "C" aclnnStatus aclnnFusedCrossEntropyLossWithMaxSum(void* workspace, uint64_t workspaceSize,
                                                            aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
