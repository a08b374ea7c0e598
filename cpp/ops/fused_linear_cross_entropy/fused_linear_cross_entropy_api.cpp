// tilegrad::fused_linear_cross_entropy: single-process loss and both gradients of
// cross_entropy(input @ weight^T, target). When the (BT x V) fp32 logits fit flce_whole_budget(),
// three GEMMs over one logits buffer that G then overwrites in place; otherwise the forward blocks
// give each row's max and sum-exp and the memory-saving gradient blocks recompute the logits (four
// GEMMs, workspace bounded by the block budget).
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/fused_linear_cross_entropy/flce_checks.h"
#include "ops/fused_linear_cross_entropy/flce_engine.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "fused_linear_cross_entropy";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};

struct Args {
  TensorView input, weight, target, loss, gin, gw;
};

void validate(const Args& a, int64_t reduction) {
  core::require_well_formed(kOp, "input", a.input);
  core::require_well_formed(kOp, "weight", a.weight);
  core::require_well_formed(kOp, "target", a.target);
  core::require_well_formed(kOp, "loss", a.loss);
  core::require_well_formed(kOp, "grad_input", a.gin);
  core::require_well_formed(kOp, "grad_weight", a.gw);
  core::require_dtype(kOp, "input", a.input, kFloatTypes);
  flce_require_same_dtype(kOp, "weight", a.weight, "input", a.input);
  core::require_dtype(kOp, "target", a.target, {DType::kInt32, DType::kInt64});
  core::require_dtype(kOp, "loss", a.loss, {DType::kFloat32});
  flce_require_same_dtype(kOp, "grad_input", a.gin, "input", a.input);
  flce_require_same_dtype(kOp, "grad_weight", a.gw, "input", a.input);
  core::require_rank(kOp, "input", a.input, 2, 2);
  core::require_rank(kOp, "weight", a.weight, 2, 2);
  core::require_rank(kOp, "target", a.target, 1, 1);
  core::require_rank(kOp, "grad_input", a.gin, 2, 2);
  core::require_rank(kOp, "grad_weight", a.gw, 2, 2);
  const int64_t bt = a.input.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
  core::check(a.weight.shape[1] == h, kOp, ": weight shape ", shape_str(a.weight.shape),
              " must have input's hidden size ", h, " as dim 1");
  core::require_shape(kOp, "target", a.target, {bt}, "(BT) from input");
  core::require_shape(kOp, "grad_input", a.gin, {bt, h}, "input shape");
  core::require_shape(kOp, "grad_weight", a.gw, {v, h}, "weight shape");
  core::check(reduction >= 0 && reduction <= 2, kOp, ": reduction must be 0 (none), 1 (mean) or 2 (sum), got ",
              reduction);
  if (reduction == 0) core::require_shape(kOp, "loss", a.loss, {bt}, "(BT) for reduction none:");
  else core::require_shape(kOp, "loss", a.loss, {}, "() for reduction mean/sum:");
  flce_check_overlaps(kOp, {{"loss", &a.loss}, {"grad_input", &a.gin}, {"grad_weight", &a.gw}},
                      {{"input", &a.input}, {"weight", &a.weight}, {"target", &a.target}});
}

class FusedLaunch final : public core::Launch {
 public:
  FusedLaunch(const Args& a, int64_t ignore_index, int64_t reduction, int64_t budget)
      : a_(a), ignore_index_(ignore_index), reduction_(reduction) {
    validate(a_, reduction);
    const core::Platform p = core::Platform::current();
    const int64_t bt = a.input.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
    const int64_t es = dtype_size(a.input.dtype);
    const bool in_ok = flce_gemmable(a.input), w_ok = flce_gemmable(a.weight);
    const bool gin_ok = flce_gemmable(a.gin), gw_ok = flce_gemmable(a.gw);
    threads_ = p.threads;
    isa_ = p.isa;
    whole_ = bt > 0 && v > 0 && h > 0 && in_ok && w_ok && gin_ok && gw_ok &&
             flce_whole_workspace(bt, v) <= uint64_t(flce_whole_budget());
    if (!whole_) {
      fwd_ = flce_forward_tiling(bt, h, v, es, in_ok, w_ok, budget, p);
      grad_ = flce_grad_tiling(bt, h, v, es, true, in_ok, w_ok, gin_ok, gw_ok, budget, p);
    }
  }
  uint64_t workspace_bytes() const override {
    return whole_ ? flce_whole_workspace(a_.input.shape[0], a_.weight.shape[0])
                  : std::max(fwd_.workspace_bytes, grad_.workspace_bytes);
  }

  void run(void* workspace) override {
    const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
    const Vec1 target(a_.target);
    std::vector<int64_t> col(bt);
    int64_t valid = 0;
    for (int64_t i = 0; i < bt; ++i) {
      const int64_t t = target.integer(i);
      if (t == ignore_index_) {
        col[i] = -1;
        continue;
      }
      if (t < 0 || t >= v)
        core::fail_index(kOp, ": target[", i, "] = ", t, " is out of range [0, ", v, ") and is not ignore_index ",
                         ignore_index_);
      col[i] = t;
      ++valid;
    }
    std::vector<float> mx(bt), sum(bt), pred(bt), grad(bt);
    const float scale = reduction_ == 1 ? (valid > 0 ? 1.0f / float(valid) : 0.0f) : 1.0f;
    for (int64_t i = 0; i < bt; ++i) grad[i] = col[i] >= 0 ? scale : 0.0f;
    if (whole_) {
      flce_whole_run(threads_, isa_, a_.input, a_.weight, col.data(), grad.data(), mx.data(), sum.data(),
                     pred.data(), a_.gin, a_.gw, workspace);
    } else {
      const auto vec = [](float* p) {
        Vec1 r;
        r.data = reinterpret_cast<char*>(p);
        r.dtype = DType::kFloat32;
        return r;
      };
      flce_forward_run(fwd_, a_.input, a_.weight, col.data(), vec(mx.data()), vec(sum.data()), vec(pred.data()),
                       nullptr, workspace);
    }
    double total = 0.0;
    const Vec1 loss(a_.loss);
    for (int64_t i = 0; i < bt; ++i) {
      const float li = col[i] >= 0 ? std::log(sum[i]) - pred[i] : 0.0f;
      if (reduction_ == 0) loss.set_f32(i, li);
      total += li;
    }
    if (reduction_ == 1)
      loss.set_f32(0, valid > 0 ? float(total / double(valid)) : std::numeric_limits<float>::quiet_NaN());
    else if (reduction_ == 2)
      loss.set_f32(0, float(total));
    if (whole_) return;
    flce_grad_run(grad_, a_.input, a_.weight, nullptr, grad.data(), mx.data(), sum.data(), col.data(), a_.gin, a_.gw,
                  workspace);
  }

 private:
  Args a_;
  int64_t ignore_index_, reduction_;
  int threads_ = 1;
  Isa isa_ = Isa::kScalar;
  bool whole_ = false;  // three GEMMs over one (BT x V) fp32 logits buffer
  FlceForwardTiling fwd_;
  FlceGradTiling grad_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void fused_linear_cross_entropy(const TensorView& input, const TensorView& weight, const TensorView& target,
                                int64_t ignore_index, int64_t reduction, const TensorView& loss,
                                const TensorView& grad_input, const TensorView& grad_weight) {
  ops::FusedLaunch launch({input, weight, target, loss, grad_input, grad_weight}, ignore_index, reduction,
                          ops::flce_budget());
  core::run_now(launch);
}

}  // namespace tilegrad
