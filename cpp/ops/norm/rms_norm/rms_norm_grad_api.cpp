// aclnnRmsNormGrad: validation (rms_norm_grad/README.md), launch, native C++ API and C ABI.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "aclnnop/aclnn_rms_norm_grad.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/norm_checks.h"
#include "core/ordered_reduce.h"
#include "core/parallel.h"
#include "core/row_view.h"
#include "core/tensor.h"
#include "ops/norm/rms_norm/rms_norm_grad_kernel.h"
#include "ops/norm/rms_norm/rms_norm_grad_tiling.h"
#include "tilegrad/add_rms_norm.hpp"
#include "tilegrad/rms_norm.hpp"

namespace tilegrad::ops {
using core::RowView;
namespace norm = core::norm;

namespace {

constexpr const char* kOp = "aclnnRmsNormGrad";
// AddRmsNorm's fused backward (no vendor operator): aclnnRmsNormGrad whose dx also receives the
// gradient reaching the residual sum from the residual path.
constexpr const char* kAddOp = "add_rms_norm_backward";

// Inputs alone. Returns k = rank(gamma).
int validate_inputs(const char* kOp, const TensorView& dy, const TensorView& x, const TensorView& rstd, const TensorView& gamma) {
  core::require_well_formed(kOp, "dy", dy);
  core::require_well_formed(kOp, "x", x);
  core::require_well_formed(kOp, "rstd", rstd);
  core::require_well_formed(kOp, "gamma", gamma);
  core::require_dtype(kOp, "dy", dy, norm::kFloatTypes);
  core::require_same_dtype(kOp, "x", x, "dy", dy);
  core::require_dtype(kOp, "rstd", rstd, {DType::kFloat32});
  norm::require_gamma_dtype(kOp, gamma, x);
  norm::require_rank_1_to_8(kOp, "x", x);
  const int k = norm::require_gamma_shape(kOp, gamma, "x", x);
  norm::check_shape(dy.shape == x.shape, kOp, ": dy shape must equal x shape ", shape_str(x.shape), ", got ",
                   shape_str(dy.shape));
  // rstd: x's leading dims, with any size-1 dims added or left out ((2,3,4) and (2,3,4,1) for x (2,3,4,8)).
  const std::vector<int64_t> lead = norm::leading(x, k);
  norm::check_shape(rstd.rank() <= kMaxDims && norm::drop_ones(rstd.shape) == norm::drop_ones(lead), kOp,
                   ": rstd shape must be x's leading dims ", shape_str(lead), " (size-1 dims aside), got ",
                   shape_str(rstd.shape));
  return k;
}

// The rules that depend on addresses: dxOut may be dy or x itself (in place); nothing else shares memory.
void check_overlaps(const char* kOp, const TensorView& dy, const TensorView& x, const TensorView& rstd, const TensorView& gamma,
                    const TensorView& dx, const TensorView& dgamma) {
  core::require_no_partial_overlap(kOp, "dxOut", dx, "dy", dy, true);
  core::require_no_partial_overlap(kOp, "dxOut", dx, "x", x, true);
  core::require_no_partial_overlap(kOp, "dxOut", dx, "rstd", rstd, false);
  core::require_no_partial_overlap(kOp, "dxOut", dx, "gamma", gamma, false);
  for (const auto& [name, t] : {std::pair{"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"gamma", &gamma}, {"dxOut", &dx}})
    core::require_no_partial_overlap(kOp, "dgammaOut", dgamma, name, *t, false);
}

int validate(const char* kOp, double weight_offset, const TensorView& dy, const TensorView& x, const TensorView& rstd,
             const TensorView& gamma, const TensorView& dx, const TensorView& dgamma) {
  core::require_well_formed(kOp, "dxOut", dx);
  core::require_well_formed(kOp, "dgammaOut", dgamma);
  core::require_dtype(kOp, "dy", dy, norm::kFloatTypes);
  core::require_same_dtype(kOp, "x", x, "dy", dy);
  core::require_same_dtype(kOp, "dxOut", dx, "x", x);
  core::require_dtype(kOp, "dgammaOut", dgamma, {DType::kFloat32});
  const int k = validate_inputs(kOp, dy, x, rstd, gamma);
  core::check(std::isfinite(weight_offset), kOp, ": weight_offset must be finite, got ", weight_offset);
  norm::check_shape(dx.shape == x.shape, kOp, ": dxOut shape must equal x shape ", shape_str(x.shape), ", got ",
                   shape_str(dx.shape));
  norm::check_shape(dgamma.shape == gamma.shape, kOp, ": dgammaOut shape must equal gamma shape ",
                   shape_str(gamma.shape), ", got ", shape_str(dgamma.shape));
  core::require_no_self_overlap(kOp, "dxOut", dx);
  core::require_no_self_overlap(kOp, "dgammaOut", dgamma);
  check_overlaps(kOp, dy, x, rstd, gamma, dx, dgamma);
  return k;
}

// dresidual: dy's dtype and x's shape; it may be dxOut itself (read before dx is written, element by
// element), and shares memory with nothing else written.
void validate_residual(const TensorView& dres, const TensorView& x, const TensorView& dx, const TensorView& dgamma) {
  core::require_well_formed(kAddOp, "dresidual", dres);
  core::require_same_dtype(kAddOp, "dresidual", dres, "x_out", x);
  core::check(dres.shape == x.shape, kAddOp, ": dresidual shape must equal x_out shape ", shape_str(x.shape),
              ", got ", shape_str(dres.shape));
  core::require_no_partial_overlap(kAddOp, "out", dx, "dresidual", dres, true);
  core::require_no_partial_overlap(kAddOp, "dgamma_out", dgamma, "dresidual", dres, false);
}

class RmsNormGradLaunch final : public core::Launch {
 public:
  // dresidual: nullptr (aclnnRmsNormGrad) or the residual path's gradient added to dx (kAddOp).
  // weight_offset: added to gamma in fp32 for dx (Gemma's `1 + weight`); dgamma does not depend on it.
  RmsNormGradLaunch(const char* op, const TensorView& dy, const TensorView& x, const TensorView& rstd,
                    const TensorView& gamma, const TensorView* dresidual, const TensorView& dx, const TensorView& dgamma,
                    double weight_offset = 0.0)
      : dtype_(x.dtype), gamma_dtype_(gamma.dtype), offset_(static_cast<float>(weight_offset)),
        residual_(dresidual != nullptr) {
    const int k = validate(op, weight_offset, dy, x, rstd, gamma, dx, dgamma);
    if (residual_) {
      validate_residual(*dresidual, x, dx, dgamma);
      dres_ = RowView(*dresidual, k);
    }
    dy_ = RowView(dy, k);
    x_ = RowView(x, k);
    dx_ = RowView(dx, k);
    gamma_ = RowView(gamma, k);
    dgamma_ = RowView(dgamma, k);
    const std::vector<int64_t> lead = norm::leading(x, k);
    rstd_ = RowView::per_row_scalar(rstd, lead);
    const bool pack = !dy_.dense() || !x_.dense() || !dx_.dense() || (residual_ && !dres_.dense());
    tiling_ = rms_norm_grad_tiling(norm::product(lead), gamma.numel(), dtype_size(dtype_), pack, dx_.dense(),
                                   core::Platform::current());
    kernel_ = rms_norm_grad_kernel(tiling_.isa);
    if (residual_)
      trace_.record(op,
                    {{"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"gamma", &gamma}, {"dresidual", dresidual},
                     {"dxOut", &dx}, {"dgammaOut", &dgamma}},
                    tiling_);
    else
      trace_.record(op,
                    {{"dy", &dy}, {"x", &x}, {"rstd", &rstd}, {"gamma", &gamma}, {"dxOut", &dx}, {"dgammaOut", &dgamma}},
                    tiling_);
    if (offset_ != 0.0f) trace_.field("weight_offset", offset_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &dy = t["dy"], &x = t["x"], &rstd = t["rstd"], &gamma = t["gamma"], &dx = t["dxOut"],
                     &dgamma = t["dgammaOut"];
    check_overlaps(kOp, dy, x, rstd, gamma, dx, dgamma);
    dy_.bind(dy.data);
    x_.bind(x.data);
    rstd_.bind(rstd.data);
    gamma_.bind(gamma.data);
    dx_.bind(dx.data);
    dgamma_.bind(dgamma.data);
  }

  void run(void* workspace) override {
    const RmsNormGradTiling& t = tiling_;
    if (t.cols == 0) return;
    if (t.rows == 0) {  // no rows: dgamma is NaN (the vendor's 950 kernels), never a silent zero
      const float nan = std::numeric_limits<float>::quiet_NaN();
      dgamma_.for_each(0, [&](int64_t, char* p) { std::memcpy(p, &nan, 4); });
      return;
    }
    char* ws = static_cast<char*>(workspace);
    float* g = t.gamma(ws);
    gamma_.widen_to_float(0, gamma_dtype_, g);
    if (offset_ != 0.0f)  // skipped at 0: aclnnRmsNormGrad's arithmetic unchanged
      for (int64_t i = 0; i < t.cols; ++i) g[i] += offset_;
    char* partials = t.partials(ws, 0);
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles(), t.threads, [&](int64_t b) {
      char *sdy = t.scratch_row(ws, b, 0), *sx = t.scratch_row(ws, b, 1);
      char *sdx = t.scratch_row(ws, b, 2), *sdres = t.scratch_row(ws, b, 3);
      float* part = t.tiles.partial(partials, b);
      std::memset(part, 0, t.cols * sizeof(float));
      // rows are gathered only when a sweep is one row (tiling.sweep_rows)
      core::for_each_sweep(
          t, b,
          [&](core::RowSweep& s, int64_t j, int64_t r) {
            s.dy[j] = dy_.readable_row(r, sdy);
            s.x[j] = x_.readable_row(r, sx);
            s.dx[j] = dx_.dense() ? dx_.row(r) : sdx;
            s.extra[j] = residual_row(r, sdres);
            s.mean[j] = 0.0f;
            std::memcpy(&s.rstd[j], rstd_.row(r), 4);
          },
          [&](const core::RowSweep& s, int64_t r0) {
            kernel_(dtype_, s, g, part, t.cols, inv_n, t.streaming_stores);
            if (!dx_.dense()) dx_.scatter(r0, sdx);
          });
    });
    if (dgamma_.dense()) {
      core::sum_row_block_partials(t.tiles, partials, reinterpret_cast<float*>(dgamma_.row(0)), t.threads);
    } else {
      float* dg = t.dgamma(ws);
      core::sum_row_block_partials(t.tiles, partials, dg, t.threads);
      dgamma_.scatter(0, reinterpret_cast<const char*>(dg));
    }
  }

 private:
  // dresidual's row r, gathered into scratch when its rows are not dense; nullptr without a residual.
  const char* residual_row(int64_t r, char* scratch) const {
    return residual_ ? dres_.readable_row(r, scratch) : nullptr;
  }

  DType dtype_, gamma_dtype_;
  float offset_;
  bool residual_;
  RowView dy_, x_, dx_, gamma_, dgamma_, rstd_, dres_;
  RmsNormGradTiling tiling_;
  RmsNormGradSweepFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

RmsNormGradOutputSpecs rms_norm_grad_output_specs(const TensorView& dy, const TensorView& x, const TensorView& rstd,
                                                  const TensorView& gamma) {
  ops::validate_inputs(ops::kOp, dy, x, rstd, gamma);
  return {{x.dtype, x.shape}, {DType::kFloat32, gamma.shape}};
}

void rms_norm_grad(const TensorView& dy, const TensorView& x, const TensorView& rstd, const TensorView& gamma,
                   const TensorView& dx, const TensorView& dgamma, double weight_offset) {
  ops::RmsNormGradLaunch launch(ops::kOp, dy, x, rstd, gamma, nullptr, dx, dgamma, weight_offset);
  core::run_now(ops::kOp, launch);
}

AddRmsNormBackwardOutputSpecs add_rms_norm_backward_output_specs(const TensorView& dy, const TensorView& x_out,
                                                                 const TensorView& rstd, const TensorView& gamma) {
  ops::validate_inputs(ops::kAddOp, dy, x_out, rstd, gamma);
  return {{x_out.dtype, x_out.shape}, {DType::kFloat32, gamma.shape}};
}

void add_rms_norm_backward(const TensorView& dy, const TensorView& x_out, const TensorView& rstd,
                           const TensorView& gamma, const TensorView* dresidual, const TensorView& dx,
                           const TensorView& dgamma) {
  ops::RmsNormGradLaunch launch(ops::kAddOp, dy, x_out, rstd, gamma, dresidual, dx, dgamma);
  core::run_now(ops::kAddOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd,
                                                        const aclTensor* gamma, const aclTensor* dxOut,
                                                        const aclTensor* dgammaOut, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
  return core::create_executor(
      ops::kOp, {{"dy", "x", "rstd", "gamma"}, {"dxOut", "dgammaOut"}}, workspaceSize, executor,
      [&](core::ExecutorTensors& t) {
        core::require_not_null(ops::kOp, "dy", dy);
        core::require_not_null(ops::kOp, "x", x);
        core::require_not_null(ops::kOp, "rstd", rstd);
        core::require_not_null(ops::kOp, "gamma", gamma);
        core::require_not_null(ops::kOp, "dxOut", dxOut);
        core::require_not_null(ops::kOp, "dgammaOut", dgammaOut);
        return std::make_unique<ops::RmsNormGradLaunch>(ops::kOp, t.view("dy", dy), t.view("x", x), t.view("rstd", rstd),
                                                        t.view("gamma", gamma), nullptr, t.view("dxOut", dxOut),
                                                        t.view("dgammaOut", dgammaOut));
      });
}

extern "C" aclnnStatus aclnnRmsNormGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
