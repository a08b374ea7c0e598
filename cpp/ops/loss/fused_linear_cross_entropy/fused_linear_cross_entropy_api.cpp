// tilegrad::fused_linear_cross_entropy: single-process loss and both gradients of
// cross_entropy(softcap(input @ weight^T + bias), target) with PyTorch's class weights and label
// smoothing plus z-loss. The plan comes from the memory budget (flce_fused_tiling): three GEMMs over
// row chunks (whole logits, or chunks with an fp32 grad_weight accumulator), else forward blocks and
// the memory-saving gradient (four GEMMs). Every GEMM is thread-count deterministic (core/gemm.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/reduction.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/flce_checks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"
#include "ops/loss/fused_linear_cross_entropy/flce_filter_stats.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "fused_linear_cross_entropy";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};

struct Args {
  TensorView input, weight, target, loss, gin, gw;
  TensorView bias, class_weight, grad_output, grad_bias, z_loss;  // optional (dtype undefined: absent)
};

TensorView optional(const TensorView* t) { return t ? *t : TensorView{}; }

void validate_options(const Args& a, Reduction reduction, const FusedLinearCrossEntropyOptions& o) {
  const int64_t bt = a.input.shape[0], v = a.weight.shape[0];
  if (core::present(a.bias)) {
    core::require_well_formed(kOp, "bias", a.bias);
    core::require_same_dtype(kOp, "bias", a.bias, "input", a.input);
    core::require_shape(kOp, "bias", a.bias, {v}, "(V) from weight");
  }
  if (core::present(a.grad_bias)) {
    core::require_well_formed(kOp, "grad_bias", a.grad_bias);
    core::require_same_dtype(kOp, "grad_bias", a.grad_bias, "input", a.input);
    core::require_shape(kOp, "grad_bias", a.grad_bias, {v}, "(V) from weight");
  }
  if (core::present(a.class_weight)) {
    core::require_well_formed(kOp, "class_weight", a.class_weight);
    core::require_dtype(kOp, "class_weight", a.class_weight, kFloatTypes);
    core::require_shape(kOp, "class_weight", a.class_weight, {v}, "(V) from weight");
  }
  if (core::present(a.grad_output)) {
    core::require_well_formed(kOp, "grad_output", a.grad_output);
    core::require_dtype(kOp, "grad_output", a.grad_output, {DType::kFloat32});
    const int64_t n = a.grad_output.numel();
    core::check(n == 1 || (reduction == Reduction::kNone && a.grad_output.rank() == 1 && n == bt), kOp,
                ": grad_output shape ", shape_str(a.grad_output.shape), " must have one element",
                reduction == Reduction::kNone ? " or be (BT) for reduction none" : "");
  }
  if (core::present(a.z_loss)) {
    core::require_well_formed(kOp, "z_loss", a.z_loss);
    core::require_dtype(kOp, "z_loss", a.z_loss, {DType::kFloat32});
    if (reduction == Reduction::kNone) core::require_shape(kOp, "z_loss", a.z_loss, {bt}, "(BT) for reduction none:");
    else core::require_shape(kOp, "z_loss", a.z_loss, {}, "() for reduction mean/sum:");
  }
  core::check(std::isfinite(o.label_smoothing) && o.label_smoothing >= 0.0f && o.label_smoothing <= 1.0f, kOp,
              ": label_smoothing must be in [0, 1], got ", o.label_smoothing);
  core::check(std::isfinite(o.lse_square_scale) && o.lse_square_scale >= 0.0f, kOp,
              ": lse_square_scale must be finite and >= 0, got ", o.lse_square_scale);
  core::check(std::isfinite(o.softcap) && o.softcap >= 0.0f, kOp, ": softcap must be finite and > 0 (0: none), got ",
              o.softcap);
  core::check(std::isfinite(o.filter_eps) && o.filter_eps >= 0.0f, kOp,
              ": filter_eps must be finite and >= 0 (0: exact), got ", o.filter_eps);
  core::check(o.filter_tolerance >= 0.0f && o.filter_tolerance < 1.0f, kOp,
              ": filter_tolerance must be in [0, 1) (0: off; 1 or more would let every block go), got ",
              o.filter_tolerance);
  core::check(!(o.filter_tolerance > 0.0f && o.filter_eps > 0.0f), kOp,
              ": filter_eps (", o.filter_eps, ") and filter_tolerance (", o.filter_tolerance,
              ") exclude each other: set one");
  core::check(o.memory_budget >= 0, kOp, ": memory_budget must be >= 0 bytes (0: default), got ", o.memory_budget);
}

void validate(const Args& a, const core::ReductionArg& r, const FusedLinearCrossEntropyOptions& o) {
  core::require_well_formed(kOp, "input", a.input);
  core::require_well_formed(kOp, "weight", a.weight);
  core::require_well_formed(kOp, "target", a.target);
  core::require_well_formed(kOp, "loss", a.loss);
  core::require_dtype(kOp, "input", a.input, kFloatTypes);
  core::require_same_dtype(kOp, "weight", a.weight, "input", a.input);
  core::require_dtype(kOp, "target", a.target, {DType::kInt32, DType::kInt64});
  core::require_dtype(kOp, "loss", a.loss, {DType::kFloat32});
  core::require_rank(kOp, "input", a.input, 2, 2);
  core::require_rank(kOp, "weight", a.weight, 2, 2);
  core::require_rank(kOp, "target", a.target, 1, 1);
  const int64_t bt = a.input.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
  core::check(a.weight.shape[1] == h, kOp, ": weight shape ", shape_str(a.weight.shape),
              " must have input's hidden size ", h, " as dim 1");
  core::require_shape(kOp, "target", a.target, {bt}, "(BT) from input");
  // An absent gradient output (undefined dtype, null data) is not computed.
  if (core::present(a.gin)) {
    core::require_well_formed(kOp, "grad_input", a.gin);
    core::require_same_dtype(kOp, "grad_input", a.gin, "input", a.input);
    core::require_shape(kOp, "grad_input", a.gin, {bt, h}, "input shape");
  }
  if (core::present(a.gw)) {
    core::require_well_formed(kOp, "grad_weight", a.gw);
    core::require_same_dtype(kOp, "grad_weight", a.gw, "input", a.input);
    core::require_shape(kOp, "grad_weight", a.gw, {v, h}, "weight shape");
  }
  core::require_valid(kOp, r);
  const Reduction reduction = r.value;
  if (reduction == Reduction::kNone) core::require_shape(kOp, "loss", a.loss, {bt}, "(BT) for reduction none:");
  else core::require_shape(kOp, "loss", a.loss, {}, "() for reduction mean/sum:");
  validate_options(a, reduction, o);
  const auto opt = [](const TensorView& t) { return core::present(t) ? &t : nullptr; };
  flce_check_overlaps(kOp,
                      {{"loss", &a.loss},
                       {"grad_input", opt(a.gin)},
                       {"grad_weight", opt(a.gw)},
                       {"grad_bias", opt(a.grad_bias)},
                       {"z_loss", opt(a.z_loss)}},
                      {{"input", &a.input},
                       {"weight", &a.weight},
                       {"target", &a.target},
                       {"bias", opt(a.bias)},
                       {"class_weight", opt(a.class_weight)},
                       {"grad_output", opt(a.grad_output)}});
}

// A (V) vector of any float dtype as fp32 values.
std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(t.numel());
  const core::Vec1 src(t);
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = src.f32(i);
  return out;
}

class FusedLaunch final : public core::Launch {
 public:
  FusedLaunch(const Args& a, int64_t ignore_index, Reduction reduction, const FusedLinearCrossEntropyOptions& o)
      : a_(a), ignore_index_(ignore_index), reduction_(reduction), o_(o) {
    validate(a_, core::reduction_arg(reduction), o);
    const core::Platform p = core::Platform::current();
    const int64_t bt = a.input.shape[0], h = a.input.shape[1], v = a.weight.shape[0];
    // An absent gradient is never a GEMM operand; without grad_weight no fp32 accumulator is planned.
    const bool want_gi = core::present(a.gin), want_gw = core::present(a.gw);
    tiling_ = flce_fused_tiling(kOp, bt, h, v, dtype_size(a.input.dtype), flce_gemmable(a.input), flce_gemmable(a.weight),
                                !want_gi || flce_gemmable(a.gin), !want_gw || flce_gemmable(a.gw),
                                o.memory_budget > 0 ? o.memory_budget : flce_budget(), p, want_gw);
    trace_.record(kOp, {{"input", &a_.input}, {"weight", &a_.weight}, {"target", &a_.target}, {"bias", &a_.bias},
                        {"class_weight", &a_.class_weight}, {"grad_output", &a_.grad_output}, {"loss", &a_.loss},
                        {"grad_input", &a_.gin}, {"grad_weight", &a_.gw}, {"grad_bias", &a_.grad_bias},
                        {"z_loss", &a_.z_loss}}, tiling_);
    core::trace_gemm(trace_, a_.input.dtype);
    trace_.field("filter_eps", o.filter_eps);
    if (o.filter_tolerance > 0.0f) trace_.field("filter_tolerance", o.filter_tolerance);
  }
  uint64_t workspace_bytes() const override { return tiling_.workspace_bytes; }

  void run(void* workspace) override;

 private:
  // One run's per-row quantities and the features every path applies (FlceFeatures points into it).
  struct Call {
    std::vector<int64_t> col;  // target column, -1: ignored
    int64_t valid = 0;         // rows not ignored
    std::vector<float> class_w, bias;
    std::vector<float> go, wt, scale, zscale;  // upstream gradient, w_t, the reduction's per-row factors
    double wt_total = 0.0;                     // sum of w_t: the mean's divisor
    FlceLossSpec spec;
    std::vector<float> grad_bias_acc;
    FlceFeatures f;
    bool any_grad = false;
    std::optional<FlceBoundTallies> bound;
    int64_t filter_blocks[2] = {0, 0};
    std::vector<float> ce, zloss;  // per-row loss terms
  };
  void prepare(Call& c) const;
  void row_scales(Call& c) const;
  void features(Call& c) const;
  void losses_without_hidden(Call& c) const;
  void run_vocab_outer(Call& c, void* workspace) const;
  void write_losses(const Call& c) const;
  void finish(const Call& c) const;
  // Row targets (-1: ignored), checked against [0, V).
  std::vector<int64_t> target_columns(int64_t* valid) const;
  // A dense rows x cols view of the input dtype over *storage (resized): the output of a gradient
  // the caller did not ask for, on the paths that write both.
  TensorView scratch(std::vector<char>* storage, int64_t rows, int64_t cols) const {
    storage->assign(size_t(rows * cols * dtype_size(a_.input.dtype)), 0);
    return TensorView(storage->data(), a_.input.dtype, {rows, cols});
  }
  void bias_grad_without_hidden(const FlceFeatures& f, const std::vector<float>& mx, const std::vector<float>& sum,
                                const std::vector<float>& cp, const std::vector<float>& ct,
                                const std::vector<float>& cu, const std::vector<int64_t>& col) const;

  Args a_;
  int64_t ignore_index_;
  Reduction reduction_;
  FusedLinearCrossEntropyOptions o_;
  FlceFusedTiling tiling_;
};

std::vector<int64_t> FusedLaunch::target_columns(int64_t* valid) const {
  const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
  const Vec1 target(a_.target);
  std::vector<int64_t> col(bt);
  *valid = 0;
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
    ++*valid;
  }
  return col;
}

// H = 0: no GEMM runs (the gradient blocks only write zeros), the logits are the (capped) bias in
// every row, and G only feeds grad_bias: formed here row by row.
void FusedLaunch::bias_grad_without_hidden(const FlceFeatures& f, const std::vector<float>& mx,
                                           const std::vector<float>& sum, const std::vector<float>& cp,
                                           const std::vector<float>& ct, const std::vector<float>& cu,
                                           const std::vector<int64_t>& col) const {
  const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
  const DType dt = a_.input.dtype;
  const FlceKernels* k = flce_kernels(tiling_.isa);
  std::vector<float> z(v);
  std::vector<char> g(v * dtype_size(dt));
  for (int64_t i = 0; i < bt; ++i) {
    if (col[i] < 0) continue;  // ignored rows have zero gradient
    std::fill(z.begin(), z.end(), 0.0f);
    k->transform_row(z.data(), v, f.bias, f.softcap);
    FlceGradRow gr;
    gr.src = z.data();
    gr.n = v;
    gr.from_logits = true;
    gr.max = mx[i];
    gr.sum_exp = sum[i];
    gr.grad = cp[i];
    gr.target_coef = ct[i];
    gr.uniform_coef = cu[i];
    gr.softcap = f.softcap;
    gr.class_w = f.class_w;
    gr.target = col[i];
    gr.out_dtype = dt;
    gr.out = g.data();
    k->grad_row(gr);
    k->accumulate_row(f.grad_bias_acc, g.data(), dt, v);
  }
}

// Targets, class weights, the reduction's per-row factors, the loss spec and the features.
void FusedLaunch::prepare(Call& c) const {
  const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
  c.col = target_columns(&c.valid);
  if (core::present(a_.class_weight)) c.class_w = to_f32(a_.class_weight);
  if (core::present(a_.bias)) c.bias = to_f32(a_.bias);
  row_scales(c);
  double cw_total = double(v);
  if (core::present(a_.class_weight)) {
    cw_total = 0.0;
    for (float x : c.class_w) cw_total += x;
  }
  c.spec.eps = o_.label_smoothing;
  c.spec.lambda = o_.lse_square_scale;
  c.spec.classes = v;
  c.spec.class_w_total = cw_total;
  c.spec.scale = c.scale.data();
  c.spec.zscale = c.zscale.data();
  c.spec.target_w = c.wt.data();
  features(c);
  c.ce.assign(bt, 0.0f);
  c.zloss.assign(bt, 0.0f);
}

// Upstream gradient per row, row weights w_t and the reduction's divisors folded into scale (cross
// entropy) and zscale (z-loss); ignored rows get 0.
void FusedLaunch::row_scales(Call& c) const {
  const int64_t bt = a_.input.shape[0];
  const bool has_cw = !c.class_w.empty();
  c.go.assign(bt, 1.0f);
  c.wt.assign(bt, 0.0f);
  c.scale.assign(bt, 0.0f);
  c.zscale.assign(bt, 0.0f);
  if (core::present(a_.grad_output)) {
    const Vec1 g(a_.grad_output);
    const bool per_row =
        a_.grad_output.numel() != 1 || (reduction_ == Reduction::kNone && a_.grad_output.rank() == 1 && bt == 1);
    for (int64_t i = 0; i < bt; ++i) c.go[i] = g.f32(per_row ? i : 0);
  }
  c.wt_total = 0.0;
  for (int64_t i = 0; i < bt; ++i)
    if (c.col[i] >= 0) {
      c.wt[i] = has_cw ? c.class_w[c.col[i]] : 1.0f;
      c.wt_total += c.wt[i];
    }
  const bool mean = reduction_ == Reduction::kMean;
  const double ce_div = mean ? c.wt_total : 1.0, z_div = mean ? double(c.valid) : 1.0;
  for (int64_t i = 0; i < bt; ++i)
    if (c.col[i] >= 0) {
      c.scale[i] = ce_div != 0.0 ? float(double(c.go[i]) / ce_div) : 0.0f;
      c.zscale[i] = z_div != 0.0 ? float(double(c.go[i]) / z_div) : 0.0f;
    }
}

// The logits transform, class weights, grad_bias's accumulator and the gradient filtering of the call.
void FusedLaunch::features(Call& c) const {
  const int64_t v = a_.weight.shape[0];
  // No grad_bias output (a bias that needs no gradient): none is computed.
  c.grad_bias_acc.assign(core::present(a_.grad_bias) ? v : 0, 0.0f);
  FlceFeatures& f = c.f;
  f.bias = c.bias.empty() ? nullptr : c.bias.data();
  f.softcap = o_.softcap;
  f.class_w = c.class_w.empty() ? nullptr : c.class_w.data();
  f.grad_bias_acc = c.grad_bias_acc.empty() ? nullptr : c.grad_bias_acc.data();
  // Filtering drops gradient work only: with no gradient wanted (the loss alone) there is none.
  c.any_grad = core::present(a_.gin) || core::present(a_.gw) || f.grad_bias_acc;
  f.filter_eps = c.any_grad ? o_.filter_eps : 0.0f;
  if (c.any_grad && o_.filter_tolerance > 0.0f && a_.input.shape[1] > 0) {
    c.bound.emplace(a_.input, a_.weight, o_, tiling_.isa, tiling_.threads);
    f.bound = &c.bound->bound();
  }
  f.filter_counts = c.filter_blocks;
}

// H = 0 without a bias: every logit is an empty dot product, 0 (softcap(0) = 0), so each row's max is
// 0, its sum of exp V and its weighted logit sum 0; the gradients have no elements. Closed form,
// instead of passes over a vocabulary whose length need not relate to any byte of data.
void FusedLaunch::losses_without_hidden(Call& c) const {
  const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
  for (int64_t i = 0; i < bt; ++i) {
    const FlceRowResult r = flce_row_result(c.spec, i, c.col[i] >= 0, 0.0f, float(v), 0.0f, 0.0f);
    c.ce[i] = r.ce;
    c.zloss[i] = r.zloss;
  }
}

// Forward blocks for every row's statistics, then the memory-saving gradient (four GEMMs).
void FusedLaunch::run_vocab_outer(Call& c, void* workspace) const {
  const int64_t bt = a_.input.shape[0], v = a_.weight.shape[0];
  FlceFeatures& f = c.f;
  // The block path writes both gradients when it runs: an absent one goes to a scratch buffer.
  std::vector<char> gin_scratch, gw_scratch;
  const bool wants_gin = core::present(a_.gin), wants_gw = core::present(a_.gw);
  const TensorView gin = wants_gin || !c.any_grad ? a_.gin : scratch(&gin_scratch, bt, a_.input.shape[1]);
  const TensorView gw = wants_gw || !c.any_grad ? a_.gw : scratch(&gw_scratch, v, a_.input.shape[1]);
  std::vector<float> mx(bt), sum(bt), pred(bt), wsum(bt, 0.0f), cp(bt), ct(bt), cu(bt);
  const auto vec = [](float* p) {
    Vec1 r;
    r.data = reinterpret_cast<char*>(p);
    r.dtype = DType::kFloat32;
    return r;
  };
  f.row_wsum = c.spec.eps > 0.0f ? wsum.data() : nullptr;
  // Bounded filtering over whole rows: the forward also sums exp(z_j - max) ||W_j|| per row. (With
  // label smoothing or a softcap |G_ij| is not a function of p_ij alone: each G block then bounds
  // its own part.)
  const bool whole_rows = f.bound && c.spec.eps == 0.0f && f.softcap == 0.0f;
  if (whole_rows) c.bound->collect_exp_norm_sums();
  flce_forward_run(tiling_.fwd, a_.input, a_.weight, c.col.data(), vec(mx.data()), vec(sum.data()), vec(pred.data()),
                   nullptr, workspace, &f);
  for (int64_t i = 0; i < bt; ++i) {
    // pred = z_t - max, so z_t = pred + max (the forward kept z_t - max to match the aclnn layout)
    const FlceRowResult r = flce_row_result(c.spec, i, c.col[i] >= 0, mx[i], sum[i], pred[i] + mx[i], wsum[i]);
    c.ce[i] = r.ce;
    c.zloss[i] = r.zloss;
    cp[i] = r.coef_p;
    ct[i] = r.coef_t;
    cu[i] = r.coef_u;
  }
  f.row_wsum = nullptr;
  if (whole_rows) c.bound->whole_rows_from_forward(c.col, sum, pred, cp, ct);
  f.row_target_coef = ct.data();
  f.row_uniform_coef = cu.data();
  if (c.any_grad)
    flce_grad_run(tiling_.grad, {a_.input, a_.weight, gin, gw}, nullptr,
                  {cp.data(), mx.data(), sum.data(), c.col.data()}, workspace, &f);
  if (a_.input.shape[1] == 0 && f.grad_bias_acc) bias_grad_without_hidden(f, mx, sum, cp, ct, cu, c.col);
}

// Losses: per row, or reduced in one fixed order (double).
void FusedLaunch::write_losses(const Call& c) const {
  const int64_t bt = a_.input.shape[0];
  const Vec1 loss(a_.loss);
  const bool want_z = core::present(a_.z_loss);
  const Vec1 zout = want_z ? Vec1(a_.z_loss) : Vec1();
  double ce_total = 0.0, z_total = 0.0;
  for (int64_t i = 0; i < bt; ++i) {
    if (reduction_ == Reduction::kNone) {
      loss.set_f32(i, c.ce[i] + c.zloss[i]);
      if (want_z) zout.set_f32(i, c.zloss[i]);
    }
    ce_total += c.ce[i];
    z_total += c.zloss[i];
  }
  if (reduction_ == Reduction::kNone) return;
  const bool mean = reduction_ == Reduction::kMean;
  const double ce = mean ? ce_total / c.wt_total : ce_total;  // 0 / 0: NaN, as PyTorch
  const double z = mean ? z_total / double(c.valid) : z_total;
  loss.set_f32(0, float(ce + z));
  if (want_z) zout.set_f32(0, float(z));
}

// The filtering diagnostics the caller asked for, and grad_bias rounded once.
void FusedLaunch::finish(const Call& c) const {
  if (o_.filter_stats) *o_.filter_stats = c.bound ? c.bound->stats() : FusedLinearCrossEntropyOptions::FilterStats{};
  if (o_.filter_blocks) {
    o_.filter_blocks[0] = c.filter_blocks[0];
    o_.filter_blocks[1] = c.filter_blocks[1];
  }
  if (core::present(a_.grad_bias)) {
    const TensorView& gb = a_.grad_bias;
    flce_kernels(tiling_.isa)->cast_row(c.grad_bias_acc.data(), a_.weight.shape[0], gb.dtype, gb.data, gb.strides[0]);
  }
}

void FusedLaunch::run(void* workspace) {
  Call c;
  prepare(c);
  if (a_.input.shape[1] == 0 && !core::present(a_.bias) && a_.weight.shape[0] > 0) {
    losses_without_hidden(c);
  } else if (tiling_.plan != FlcePlan::kVocabOuter) {
    flce_chunked_run(tiling_, {a_.input, a_.weight, a_.gin, a_.gw}, c.col.data(), c.spec, c.f,
                     {c.ce.data(), c.zloss.data()}, workspace);
  } else {
    run_vocab_outer(c, workspace);
  }
  write_losses(c);
  finish(c);
}

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void fused_linear_cross_entropy_ex(const TensorView& input, const TensorView& weight, const TensorView& target,
                                   int64_t ignore_index, Reduction reduction, const TensorView& loss,
                                   const TensorView& grad_input, const TensorView& grad_weight,
                                   const FusedLinearCrossEntropyOptions& options) {
  ops::Args a{input,
              weight,
              target,
              loss,
              grad_input,
              grad_weight,
              ops::optional(options.bias),
              ops::optional(options.class_weight),
              ops::optional(options.grad_output),
              ops::optional(options.grad_bias),
              ops::optional(options.z_loss)};
  ops::FusedLaunch launch(a, ignore_index, reduction, options);
  core::run_now(ops::kOp, launch);
}

void fused_linear_cross_entropy(const TensorView& input, const TensorView& weight, const TensorView& target,
                                int64_t ignore_index, Reduction reduction, const TensorView& loss,
                                const TensorView& grad_input, const TensorView& grad_weight) {
  fused_linear_cross_entropy_ex(input, weight, target, ignore_index, reduction, loss, grad_input, grad_weight, {});
}

}  // namespace tilegrad
