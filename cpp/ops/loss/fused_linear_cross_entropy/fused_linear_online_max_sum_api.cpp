// aclnnFusedLinearOnlineMaxSum: validation (specification section 5), launch, native C++ API and C ABI.
#include <limits>
#include <memory>
#include <vector>

#include "aclnnop/aclnn_fused_linear_online_max_sum.h"
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

constexpr const char* kOp = "aclnnFusedLinearOnlineMaxSum";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
constexpr std::initializer_list<DType> kIndexTypes = {DType::kInt32, DType::kInt64};

struct Args {
  TensorView input, weight, target, max, sum, pred, mask, masked, logits;  // logits optional
};

void check_overlaps(const Args& a) {
  flce_check_overlaps(kOp,
                      {{"logitsMaxLocalOut", &a.max},
                       {"sumExpLogitsLocalOut", &a.sum},
                       {"predictedLogitsLocalOut", &a.pred},
                       {"targetMaskOut", &a.mask},
                       {"maskedTargetOut", &a.masked},
                       {"vocabParallelLogitsOutOptional", core::present(a.logits) ? &a.logits : nullptr}},
                      {{"input", &a.input}, {"weight", &a.weight}, {"target", &a.target}});
}

void validate(const Args& a, int64_t start, int64_t end) {
  const TensorView* views[] = {&a.input, &a.weight, &a.target, &a.max, &a.sum, &a.pred, &a.mask, &a.masked};
  const char* names[] = {"input", "weight", "target", "logitsMaxLocalOut", "sumExpLogitsLocalOut",
                         "predictedLogitsLocalOut", "targetMaskOut", "maskedTargetOut"};
  for (int i = 0; i < 8; ++i) core::require_well_formed(kOp, names[i], *views[i]);
  const bool has_logits = core::present(a.logits);
  if (has_logits) core::require_well_formed(kOp, "vocabParallelLogitsOutOptional", a.logits);
  // dtypes
  core::require_dtype(kOp, "input", a.input, kFloatTypes);
  core::require_same_dtype(kOp, "weight", a.weight, "input", a.input);
  core::require_dtype(kOp, "target", a.target, kIndexTypes);
  core::require_dtype(kOp, "logitsMaxLocalOut", a.max, {DType::kFloat32});
  core::require_dtype(kOp, "sumExpLogitsLocalOut", a.sum, {DType::kFloat32});
  core::require_dtype(kOp, "predictedLogitsLocalOut", a.pred, {DType::kFloat32});
  core::require_dtype(kOp, "targetMaskOut", a.mask, {DType::kUInt8});
  core::require_same_dtype(kOp, "maskedTargetOut", a.masked, "target", a.target);
  if (has_logits)
    core::require_same_dtype(kOp, "vocabParallelLogitsOutOptional", a.logits, "input", a.input);
  // ranks
  core::require_rank(kOp, "input", a.input, 2, 2);
  core::require_rank(kOp, "weight", a.weight, 2, 2);
  core::require_rank(kOp, "target", a.target, 1, 1);
  core::require_rank(kOp, "logitsMaxLocalOut", a.max, 1, 1);
  core::require_rank(kOp, "sumExpLogitsLocalOut", a.sum, 1, 1);
  core::require_rank(kOp, "predictedLogitsLocalOut", a.pred, 1, 1);
  core::require_rank(kOp, "targetMaskOut", a.mask, 1, 1);
  core::require_rank(kOp, "maskedTargetOut", a.masked, 1, 1);
  if (has_logits) core::require_rank(kOp, "vocabParallelLogitsOutOptional", a.logits, 2, 2);
  // shapes
  const int64_t bt = a.input.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
  core::check(a.weight.shape[1] == h, kOp, ": weight shape ", shape_str(a.weight.shape),
              " must have input's hidden size ", h, " as dim 1");
  core::require_shape(kOp, "target", a.target, {bt}, "(BT) from input");
  core::require_shape(kOp, "logitsMaxLocalOut", a.max, {bt}, "(BT) from input");
  core::require_shape(kOp, "sumExpLogitsLocalOut", a.sum, {bt}, "(BT) from input");
  core::require_shape(kOp, "predictedLogitsLocalOut", a.pred, {bt}, "(BT) from input");
  core::require_shape(kOp, "targetMaskOut", a.mask, {(bt + 7) / 8}, "(ceil(BT/8)) from input");
  core::require_shape(kOp, "maskedTargetOut", a.masked, {bt}, "(BT) from input");
  if (has_logits) core::require_shape(kOp, "vocabParallelLogitsOutOptional", a.logits, {bt, v}, "(BT, V)");
  // attributes
  core::check(start >= 0, kOp, ": vocabStartIndex must be >= 0, got ", start);
  core::check(end >= start, kOp, ": vocabEndIndex must be >= vocabStartIndex ", start, ", got ", end);
  // end - start < V is the vendor's own usage (its examples and system tests): statistics run over all
  // V columns, targets are masked against [start, end). More than V would name columns that do not
  // exist (the vendor does not check; its kernel would read past the weight): refused.
  core::check(end - start <= v, kOp, ": vocabEndIndex - vocabStartIndex must be <= weight rows ", v, ", got ",
              end - start);
  check_overlaps(a);
}

class OnlineMaxSumLaunch final : public core::Launch {
 public:
  OnlineMaxSumLaunch(const Args& a, int64_t start, int64_t end, int64_t budget) : a_(a), start_(start), end_(end) {
    validate(a_, start, end);
    tiling_ = flce_forward_tiling(kOp, a.input.shape[0], a.input.shape[1], a.weight.shape[0], dtype_size(a.input.dtype),
                                  flce_gemmable(a.input), flce_gemmable(a.weight), budget,
                                  core::Platform::current());
    trace_.record(kOp, {{"input", &a_.input}, {"weight", &a_.weight}, {"target", &a_.target},
                        {"logitsMaxLocalOut", &a_.max}, {"sumExpLogitsLocalOut", &a_.sum},
                        {"predictedLogitsLocalOut", &a_.pred}, {"targetMaskOut", &a_.mask},
                        {"maskedTargetOut", &a_.masked}, {"vocabParallelLogitsOutOptional", &a_.logits}}, tiling_);
    core::trace_gemm(trace_, a_.input.dtype);
  }
  uint64_t workspace_bytes() const override { return tiling_.workspace_bytes; }

  void bind(const core::Operands& t) override {
    Args a = a_;
    t.bind({{"input", &a.input}, {"weight", &a.weight}, {"target", &a.target}, {"logitsMaxLocalOut", &a.max},
            {"sumExpLogitsLocalOut", &a.sum}, {"predictedLogitsLocalOut", &a.pred}, {"targetMaskOut", &a.mask},
            {"maskedTargetOut", &a.masked}, {"vocabParallelLogitsOutOptional", &a.logits}});
    check_overlaps(a);
    a_ = a;
  }

  void run(void* workspace) override {
    const int64_t bt = a_.input.shape[0];
    if (bt == 0) return;
    const Vec1 target(a_.target), masked(a_.masked), mask(a_.mask);
    std::vector<int64_t> local(bt);
    for (int64_t i = 0; i < bt; ++i) {
      const int64_t t = target.integer(i);
      const bool out_of_shard = t < start_ || t >= end_;
      local[i] = out_of_shard ? -1 : t - start_;
      masked.set_integer(i, out_of_shard ? 0 : t - start_);
    }
    // The padding bits of the last byte are those of rows with target 0, as the vendor's golden
    // computes them (1 unless 0 lies in [start, end)); no reader looks past BT.
    const bool padding_bit = 0 < start_ || 0 >= end_;
    for (int64_t byte = 0; byte < (bt + 7) / 8; ++byte) {
      uint8_t bits = 0;
      for (int64_t k = 0; k < 8; ++k) {
        const bool out_of_shard = byte * 8 + k < bt ? local[byte * 8 + k] < 0 : padding_bit;
        if (out_of_shard) bits |= uint8_t(1u << k);
      }
      *reinterpret_cast<uint8_t*>(mask.ptr(byte)) = bits;
    }
    if (a_.input.shape[1] == 0 && !core::present(a_.logits)) {
      write_zero_width_statistics(bt);
      return;
    }
    flce_forward_run(tiling_, a_.input, a_.weight, local.data(), Vec1(a_.max), Vec1(a_.sum), Vec1(a_.pred),
                     core::present(a_.logits) ? &a_.logits : nullptr, workspace);
  }

 private:
  // H = 0: every logit is an empty dot product, 0. Closed form (max 0, sum of exp V, target logit 0)
  // instead of a pass over the vocabulary whose length need not relate to any byte of input or output.
  void write_zero_width_statistics(int64_t bt) const {
    const Vec1 max(a_.max), sum(a_.sum), pred(a_.pred);
    const int64_t vocab = a_.weight.shape[0];
    for (int64_t i = 0; i < bt; ++i) {
      max.set_f32(i, vocab > 0 ? 0.0f : -std::numeric_limits<float>::infinity());
      sum.set_f32(i, static_cast<float>(vocab));
      pred.set_f32(i, 0.0f);
    }
  }

  Args a_;
  int64_t start_, end_;
  FlceForwardTiling tiling_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void fused_linear_online_max_sum(const TensorView& input, const TensorView& weight, const TensorView& target,
                                 int64_t vocab_start, int64_t vocab_end, const TensorView& logits_max,
                                 const TensorView& sum_exp_logits, const TensorView& predicted_logits,
                                 const TensorView& target_mask, const TensorView& masked_target,
                                 const TensorView* logits) {
  ops::Args a{input, weight, target, logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target,
              logits ? *logits : TensorView{}};
  ops::OnlineMaxSumLaunch launch(a, vocab_start, vocab_end, ops::flce_budget());
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* target, int64_t vocabStartIndex,
    int64_t vocabEndIndex, aclTensor* logitsMaxLocalOut, aclTensor* sumExpLogitsLocalOut,
    aclTensor* predictedLogitsLocalOut, aclTensor* targetMaskOut, aclTensor* maskedTargetOut,
    aclTensor* vocabParallelLogitsOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = ops::kOp;
  const core::TensorParams params{{"input", "weight", "target"},
                                  {"logitsMaxLocalOut", "sumExpLogitsLocalOut", "predictedLogitsLocalOut",
                                   "targetMaskOut", "maskedTargetOut", "vocabParallelLogitsOutOptional"}};
  return core::create_executor(op, params, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(op, "input", input);
    core::require_not_null(op, "weight", weight);
    core::require_not_null(op, "target", target);
    core::require_not_null(op, "logitsMaxLocalOut", logitsMaxLocalOut);
    core::require_not_null(op, "sumExpLogitsLocalOut", sumExpLogitsLocalOut);
    core::require_not_null(op, "predictedLogitsLocalOut", predictedLogitsLocalOut);
    core::require_not_null(op, "targetMaskOut", targetMaskOut);
    core::require_not_null(op, "maskedTargetOut", maskedTargetOut);
    ops::Args a{t.view("input", input),
                t.view("weight", weight),
                t.view("target", target),
                t.view("logitsMaxLocalOut", logitsMaxLocalOut),
                t.view("sumExpLogitsLocalOut", sumExpLogitsLocalOut),
                t.view("predictedLogitsLocalOut", predictedLogitsLocalOut),
                t.view("targetMaskOut", targetMaskOut),
                t.view("maskedTargetOut", maskedTargetOut),
                t.optional_view("vocabParallelLogitsOutOptional", vocabParallelLogitsOutOptional)};
    return std::make_unique<ops::OnlineMaxSumLaunch>(a, vocabStartIndex, vocabEndIndex, ops::flce_budget());
  });
}

extern "C" aclnnStatus aclnnFusedLinearOnlineMaxSum(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                    aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
