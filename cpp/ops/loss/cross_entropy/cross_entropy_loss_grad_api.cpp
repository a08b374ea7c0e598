// aclnnCrossEntropyLossGrad: validation (specification sections 0 and 3), launch, native C++ API and C ABI.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "core/vec1.h"
#include "core/workspace.h"
#include "ops/loss/cross_entropy/cross_entropy_common.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_grad_kernel.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_grad_tiling.h"
#include "tilegrad/cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnCrossEntropyLossGrad";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct GradArgs {
  TensorView grad_loss, log_prob, target, weight, grad_zloss, lse, x_grad;
  ce::Attributes attr;
};

using core::present;

void require_same_dtype(const char* arg, const TensorView& t, const TensorView& log_prob) {
  core::require_same_dtype(kOp, arg, t, "logProb", log_prob);
}

// The rules that depend on addresses: xGradOut may be logProb itself, never share memory with another input.
void check_overlaps(const GradArgs& a) {
  core::require_no_partial_overlap(kOp, "xGradOut", a.x_grad, "logProb", a.log_prob, true);
  core::require_no_partial_overlap(kOp, "xGradOut", a.x_grad, "gradLoss", a.grad_loss, false);
  core::require_no_partial_overlap(kOp, "xGradOut", a.x_grad, "target", a.target, false);
  for (const auto& [name, t] : {std::pair{"weightOptional", &a.weight}, {"gradZlossOptional", &a.grad_zloss},
                                {"lseForZlossOptional", &a.lse}})
    if (present(*t)) core::require_no_partial_overlap(kOp, "xGradOut", a.x_grad, name, *t, false);
}

// Validation in the specification's order (section 0): dtypes, ranks, shapes, attributes, overlaps. Returns the reduction.
Reduction validate(const GradArgs& a) {
  const bool has_w = present(a.weight), has_gz = present(a.grad_zloss), has_lse = present(a.lse);
  core::require_well_formed(kOp, "gradLoss", a.grad_loss);
  core::require_well_formed(kOp, "logProb", a.log_prob);
  core::require_well_formed(kOp, "target", a.target);
  core::require_well_formed(kOp, "xGradOut", a.x_grad);
  if (has_w) core::require_well_formed(kOp, "weightOptional", a.weight);
  if (has_gz) core::require_well_formed(kOp, "gradZlossOptional", a.grad_zloss);
  if (has_lse) core::require_well_formed(kOp, "lseForZlossOptional", a.lse);
  // dtypes
  core::require_dtype(kOp, "logProb", a.log_prob, kFloatTypes);
  require_same_dtype("gradLoss", a.grad_loss, a.log_prob);
  require_same_dtype("xGradOut", a.x_grad, a.log_prob);
  if (has_gz) require_same_dtype("gradZlossOptional", a.grad_zloss, a.log_prob);
  if (has_lse) require_same_dtype("lseForZlossOptional", a.lse, a.log_prob);
  core::require_dtype(kOp, "target", a.target, {DType::kInt64, DType::kInt32});
  if (has_w) core::require_dtype(kOp, "weightOptional", a.weight, {DType::kFloat32});
  // ranks
  core::require_rank(kOp, "logProb", a.log_prob, 2, 2);
  core::require_rank(kOp, "xGradOut", a.x_grad, 2, 2);
  core::require_rank(kOp, "target", a.target, 1, 1);
  core::require_rank(kOp, "gradLoss", a.grad_loss, 0, 1);
  if (has_w) core::require_rank(kOp, "weightOptional", a.weight, 1, 1);
  if (has_gz) core::require_rank(kOp, "gradZlossOptional", a.grad_zloss, 0, 1);
  if (has_lse) core::require_rank(kOp, "lseForZlossOptional", a.lse, 1, 1);
  // shapes
  const int64_t n = a.log_prob.shape[0], c = a.log_prob.shape[1];
  core::require_shape(kOp, "target", a.target, {n}, "logProb shape[0] (N)");
  core::require_shape(kOp, "xGradOut", a.x_grad, a.log_prob.shape, "logProb shape");
  if (has_w) core::require_shape(kOp, "weightOptional", a.weight, {c}, "logProb shape[1] (C)");
  if (has_lse) core::require_shape(kOp, "lseForZlossOptional", a.lse, {n}, "logProb shape[0] (N)");
  ce::require_loss_shapes(kOp, a.attr.reduction, n,
                          {{"gradLoss", &a.grad_loss}, {"gradZlossOptional", has_gz ? &a.grad_zloss : nullptr}});
  // attributes
  const Reduction r = ce::require_attributes(kOp, a.attr);
  // the output against itself and the inputs
  // (an empty view cannot overlap itself; NumPy gives empty arrays zero strides)
  if (a.x_grad.numel() > 0) core::require_no_self_overlap(kOp, "xGradOut", a.x_grad);
  check_overlaps(a);
  return r;
}

class CrossEntropyLossGradLaunch final : public core::Launch {
 public:
  explicit CrossEntropyLossGradLaunch(const GradArgs& a) : a_(a) {
    red_ = validate(a_);
    if (!present(a_.weight)) a_.weight = TensorView{};
    if (!present(a_.grad_zloss)) a_.grad_zloss = TensorView{};
    if (!present(a_.lse)) a_.lse = TensorView{};
    rows_ = a_.log_prob.shape[0];
    cols_ = a_.log_prob.shape[1];
    contiguous_ = (cols_ <= 1 || (a_.log_prob.strides[1] == 1 && a_.x_grad.strides[1] == 1));
    tiling_ = cross_entropy_loss_grad_tiling(rows_, cols_, 2 * dtype_size(a_.log_prob.dtype), contiguous_,
                                             core::Platform::current());
    kernel_ = cross_entropy_loss_grad_kernel(tiling_.isa);
    use_weight_vector_ = a_.weight.data != nullptr && a_.attr.label_smoothing > 0 && cols_ > 0 && rows_ > 0;
    trace_.record(kOp, {{"gradLoss", &a_.grad_loss}, {"logProb", &a_.log_prob}, {"target", &a_.target},
                        {"weightOptional", &a_.weight}, {"gradZlossOptional", &a_.grad_zloss},
                        {"lseForZlossOptional", &a_.lse}, {"xGradOut", &a_.x_grad}}, tiling_);
  }

  uint64_t workspace_bytes() const override {
    return use_weight_vector_ && ce::weight_needs_copy(a_.weight)
               ? static_cast<uint64_t>(core::checked_mul(kOp, "workspace weight copy", cols_, 4))
               : 0;
  }

  void bind(const core::Operands& t) override {
    GradArgs a = a_;
    t.bind({{"gradLoss", &a.grad_loss}, {"logProb", &a.log_prob}, {"target", &a.target},
            {"weightOptional", &a.weight}, {"gradZlossOptional", &a.grad_zloss}, {"lseForZlossOptional", &a.lse},
            {"xGradOut", &a.x_grad}});
    check_overlaps(a);
    a_ = a;
  }

  void run(void* workspace) override {
    if (rows_ == 0) return;
    // Serial, row-ordered: every target checked (lowest bad row reported), divisors reduced.
    const ce::TargetScan scan = ce::scan_targets(kOp, a_.target, a_.weight, cols_, a_.attr.ignore_index);
    if (cols_ == 0) return;
    const bool mean = red_ == Reduction::kMean;
    const double ls = a_.attr.label_smoothing, zscale = a_.attr.zscale;
    const double d = mean ? scan.weight_sum : 1.0;
    const double dz = mean ? static_cast<double>(scan.kept) : 1.0;
    const double wtotal = ls > 0 ? ce::weight_total(a_.weight, cols_) : 0.0;
    const bool zloss = zscale != 0 && a_.lse.data != nullptr;
    const float* w = use_weight_vector_ ? ce::contiguous_weight(a_.weight, cols_, static_cast<float*>(workspace))
                                        : nullptr;
    const core::Vec1 grad_loss(a_.grad_loss), grad_zloss(a_.grad_zloss), lse(a_.lse), target(a_.target),
        weight(a_.weight);
    const double g_scalar = red_ == Reduction::kNone ? 0.0 : grad_loss.f32(0);
    const double gz_scalar = (red_ != Reduction::kNone && a_.grad_zloss.data != nullptr) ? grad_zloss.f32(0) : 0.0;
    const DType dt = a_.log_prob.dtype;
    const int64_t es = dtype_size(dt);
    const auto& t = tiling_;
    core::parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
      const int64_t rb = tile / t.col_chunks, cc = tile % t.col_chunks;
      const int64_t r0 = rb * t.rows_per_tile, r1 = std::min(rows_, r0 + t.rows_per_tile);
      const int64_t c0 = cc * t.chunk_cols, c1 = std::min(cols_, c0 + t.chunk_cols);
      for (int64_t i = r0; i < r1; ++i) {
        CeGradSpan s;
        const int64_t ti = target.integer(i);
        if (ti == a_.attr.ignore_index) {
          s.zero = true;
        } else {
          const double g = red_ == Reduction::kNone ? grad_loss.f32(i) : g_scalar;
          const double wt = a_.weight.data ? weight.f32(ti) : 1.0;
          const double ai = g * (1.0 - ls) / d;
          const double bi = ls > 0 ? g * (ls / static_cast<double>(cols_)) / d : 0.0;
          double pc = ai * wt + bi * wtotal;
          if (zloss) {
            const double gz = a_.grad_zloss.data == nullptr ? 0.0
                              : red_ == Reduction::kNone    ? grad_zloss.f32(i)
                                                            : gz_scalar;
            pc += 2.0 * zscale * lse.f32(i) * (g + gz) / dz;
          }
          s.p_coef = static_cast<float>(pc);
          s.add_coef = static_cast<float>(-bi);
          s.target_add = static_cast<float>(-ai * wt);
          s.target = ti;
        }
        const char* lp_row = static_cast<const char*>(a_.log_prob.data) + i * a_.log_prob.strides[0] * es;
        char* out_row = static_cast<char*>(a_.x_grad.data) + i * a_.x_grad.strides[0] * es;
        if (contiguous_) {
          s.log_prob = lp_row + c0 * es;
          s.out = out_row + c0 * es;
          s.n = c1 - c0;
          s.weight = w ? w + c0 : nullptr;
          s.target = s.zero ? -1 : s.target - c0;
          kernel_(dt, s, t.streaming_stores);
          continue;
        }
        // Strided columns: gather logProb and scatter xGrad through stack buffers.
        alignas(64) char in_buf[kPack * 4], out_buf[kPack * 4];
        const int64_t ls1 = a_.log_prob.strides[1] * es, os1 = a_.x_grad.strides[1] * es;
        const int64_t target_col = s.zero ? -1 : s.target;
        for (int64_t j0 = c0; j0 < c1; j0 += kPack) {
          const int64_t n = std::min(kPack, c1 - j0);
          for (int64_t j = 0; j < n; ++j) std::memcpy(in_buf + j * es, lp_row + (j0 + j) * ls1, es);
          s.log_prob = in_buf;
          s.out = out_buf;
          s.n = n;
          s.weight = w ? w + j0 : nullptr;
          s.target = target_col < 0 ? -1 : target_col - j0;
          kernel_(dt, s, false);
          for (int64_t j = 0; j < n; ++j) std::memcpy(out_row + (j0 + j) * os1, out_buf + j * es, es);
        }
      }
    });
  }

 private:
  static constexpr int64_t kPack = 1024;
  GradArgs a_;
  Reduction red_ = Reduction::kMean;
  int64_t rows_ = 0, cols_ = 0;
  bool contiguous_ = true, use_weight_vector_ = false;
  CrossEntropyLossGradTiling tiling_;
  CeGradSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void cross_entropy_loss_grad(const TensorView& grad_loss, const TensorView& log_prob, const TensorView& target,
                             const TensorView& weight, const TensorView& grad_zloss, const TensorView& lse_for_zloss,
                             const CrossEntropyOptions& o, const TensorView& x_grad) {
  ops::GradArgs a{grad_loss, log_prob, target, weight, grad_zloss, lse_for_zloss, x_grad, ops::ce::attributes_of(o)};
  ops::CrossEntropyLossGradLaunch launch(a);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* gradLoss, const aclTensor* logProb, const aclTensor* target, const aclTensor* weightOptional,
    const aclTensor* gradZlossOptional, const aclTensor* lseForZlossOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, const aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const ops::ce::Attributes attr =
      ops::ce::attributes_of(reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss);
  const core::TensorParams params{
      {"gradLoss", "logProb", "target", "weightOptional", "gradZlossOptional", "lseForZlossOptional"}, {"xGradOut"}};
  return core::create_executor(ops::kOp, params, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "gradLoss", gradLoss);
    core::require_not_null(ops::kOp, "logProb", logProb);
    core::require_not_null(ops::kOp, "target", target);
    core::require_not_null(ops::kOp, "xGradOut", out);
    ops::GradArgs a;
    a.grad_loss = t.view("gradLoss", gradLoss);
    a.log_prob = t.view("logProb", logProb);
    a.target = t.view("target", target);
    a.weight = t.optional_view("weightOptional", weightOptional);
    a.grad_zloss = t.optional_view("gradZlossOptional", gradZlossOptional);
    a.lse = t.optional_view("lseForZlossOptional", lseForZlossOptional);
    a.x_grad = t.view("xGradOut", out);
    a.attr = attr;
    return std::make_unique<ops::CrossEntropyLossGradLaunch>(a);
  });
}

extern "C" aclnnStatus aclnnCrossEntropyLossGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
