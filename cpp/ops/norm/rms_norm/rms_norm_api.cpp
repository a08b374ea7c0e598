// aclnnRmsNorm and aclnnGemmaRmsNorm (gamma + 1): validation (README.md), launch, native C++ API and C ABI.
#include <cmath>
#include <memory>

#include "aclnnop/aclnn_gemma_rms_norm.h"
#include "aclnnop/aclnn_rms_norm.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/norm_checks.h"
#include "core/parallel.h"
#include "core/row_view.h"
#include "core/tensor.h"
#include "ops/norm/rms_norm/rms_norm_kernel.h"
#include "ops/norm/rms_norm/rms_norm_tiling.h"
#include "tilegrad/rms_norm.hpp"

namespace tilegrad::ops {
using core::RowView;
namespace norm = core::norm;

namespace {

constexpr const char* kOp = "aclnnRmsNorm";
constexpr const char* kGemma = "aclnnGemmaRmsNorm";  // y = x * rstd * (1 + gamma): the same launch

void require_input_dtypes(const char* op, const TensorView& x, const TensorView& gamma) {
  core::require_dtype(op, "x", x, norm::kFloatTypes);
  norm::require_gamma_dtype(op, gamma, x);
}

// x's rank and gamma's shape. Returns k = rank(gamma).
int require_input_shapes(const char* op, const TensorView& x, const TensorView& gamma) {
  norm::require_rank_1_to_8(op, "x", x);
  return norm::require_gamma_shape(op, gamma, "x", x);
}

// Inputs alone: dtypes, ranks, gamma's shape. Returns k = rank(gamma).
int validate_inputs(const char* op, const TensorView& x, const TensorView& gamma) {
  core::require_well_formed(op, "x", x);
  core::require_well_formed(op, "gamma", gamma);
  require_input_dtypes(op, x, gamma);
  return require_input_shapes(op, x, gamma);
}

// The rules that depend on addresses: yOut may be x itself (in place); nothing else shares memory.
void check_overlaps(const char* op, const TensorView& x, const TensorView& gamma, const TensorView& y,
                    const TensorView& rstd) {
  core::require_no_partial_overlap(op, "yOut", y, "x", x, true);
  core::require_no_partial_overlap(op, "yOut", y, "gamma", gamma, false);
  core::require_no_partial_overlap(op, "rstdOut", rstd, "x", x, false);
  core::require_no_partial_overlap(op, "rstdOut", rstd, "gamma", gamma, false);
  core::require_no_partial_overlap(op, "rstdOut", rstd, "yOut", y, false);
}

int validate(const char* op, const TensorView& x, const TensorView& gamma, double eps, const TensorView& y,
             const TensorView& rstd, double weight_offset) {
  core::require_well_formed(op, "x", x);
  core::require_well_formed(op, "gamma", gamma);
  core::require_well_formed(op, "yOut", y);
  core::require_well_formed(op, "rstdOut", rstd);
  require_input_dtypes(op, x, gamma);
  core::require_same_dtype(op, "yOut", y, "x", x);
  core::require_dtype(op, "rstdOut", rstd, {DType::kFloat32});
  const int k = require_input_shapes(op, x, gamma);
  norm::check_shape(y.shape == x.shape, op, ": yOut shape must equal x shape ", shape_str(x.shape), ", got ",
                   shape_str(y.shape));
  const std::vector<int64_t> rs = norm::rstd_shape(x, k);
  norm::check_shape(rstd.shape == rs, op, ": rstdOut shape must be x's leading dims then ones ", shape_str(rs),
                   ", got ", shape_str(rstd.shape));
  norm::check_shape(eps >= 0, op, ": epsilon must be >= 0, got ", eps);
  core::check(std::isfinite(weight_offset), op, ": weight_offset must be finite, got ", weight_offset);
  core::require_no_self_overlap(op, "yOut", y);
  core::require_no_self_overlap(op, "rstdOut", rstd);
  check_overlaps(op, x, gamma, y, rstd);
  return k;
}

class RmsNormLaunch final : public core::Launch {
 public:
  // weight_offset: added to gamma in fp32 after widening (1 for Gemma's `1 + weight`, 0 otherwise).
  RmsNormLaunch(const char* op, const TensorView& x, const TensorView& gamma, double eps, const TensorView& y,
                const TensorView& rstd, double weight_offset = 0.0)
      : op_(op), dtype_(x.dtype), eps_(static_cast<float>(eps)), offset_(static_cast<float>(weight_offset)) {
    const int k = validate(op_, x, gamma, eps, y, rstd, weight_offset);
    x_ = RowView(x, k);
    y_ = RowView(y, k);
    gamma_ = RowView(gamma, k);
    gamma_dtype_ = gamma.dtype;
    rstd_ = RowView(rstd, k);
    const int64_t rows = norm::product(norm::leading(x, k)), cols = gamma.numel();
    tiling_ = rms_norm_tiling(rows, cols, dtype_size(x.dtype), !x_.dense() || !y_.dense(), y_.dense(),
                              core::Platform::current());
    kernel_ = rms_norm_kernel(tiling_.isa);
    trace_.record(op_, {{"x", &x}, {"gamma", &gamma}, {"yOut", &y}, {"rstdOut", &rstd}}, tiling_);
    if (offset_ != 0.0f) trace_.field("weight_offset", offset_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &x = t["x"], &gamma = t["gamma"], &y = t["yOut"], &rstd = t["rstdOut"];
    check_overlaps(op_, x, gamma, y, rstd);
    x_.bind(x.data);
    gamma_.bind(gamma.data);
    y_.bind(y.data);
    rstd_.bind(rstd.data);
  }

  void run(void* workspace) override {
    const RmsNormTiling& t = tiling_;
    if (t.rows == 0) return;
    char* ws = static_cast<char*>(workspace);
    float* g = t.gamma(ws);
    gamma_.widen_to_float(0, gamma_dtype_, g);
    if (offset_ != 0.0f)  // skipped at 0, so that a -0 weight keeps its sign as in aclnnRmsNorm
      for (int64_t i = 0; i < t.cols; ++i) g[i] += offset_;
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles(), t.threads, [&](int64_t tile) {
      char *sx = t.scratch_row(ws, tile, 0), *sy = t.scratch_row(ws, tile, 1);
      for (int64_t r = t.tile_begin(tile); r < t.tile_end(tile); ++r) {
        const char* xr = x_.row(r);
        if (!x_.dense()) x_.gather(r, sx), xr = sx;
        char* yr = y_.dense() ? y_.row(r) : sy;
        const float rstd = kernel_(dtype_, xr, g, yr, t.cols, eps_, inv_n, t.streaming_stores);
        if (!y_.dense()) y_.scatter(r, sy);
        std::memcpy(rstd_.row(r), &rstd, 4);
      }
    });
  }

 private:
  const char* op_;
  DType dtype_, gamma_dtype_ = DType::kFloat32;
  float eps_, offset_;
  RowView x_, y_, gamma_, rstd_;
  RmsNormTiling tiling_;
  RmsNormRowFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

RmsNormOutputSpecs rms_norm_output_specs(const TensorView& x, const TensorView& gamma) {
  const int k = ops::validate_inputs(ops::kOp, x, gamma);
  return {{x.dtype, x.shape}, {DType::kFloat32, core::norm::rstd_shape(x, k)}};
}

void rms_norm(const TensorView& x, const TensorView& gamma, double epsilon, const TensorView& y,
              const TensorView& rstd, double weight_offset) {
  ops::RmsNormLaunch launch(ops::kOp, x, gamma, epsilon, y, rstd, weight_offset);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                    const aclTensor* yOut, const aclTensor* rstdOut,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"x", "gamma"}, {"yOut", "rstdOut"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "x", x);
    core::require_not_null(ops::kOp, "gamma", gamma);
    core::require_not_null(ops::kOp, "yOut", yOut);
    core::require_not_null(ops::kOp, "rstdOut", rstdOut);
    return std::make_unique<ops::RmsNormLaunch>(ops::kOp, t.view("x", x), t.view("gamma", gamma), epsilon,
                                                t.view("yOut", yOut), t.view("rstdOut", rstdOut));
  });
}

extern "C" aclnnStatus aclnnRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnGemmaRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                         const aclTensor* yOut, const aclTensor* rstdOut,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(ops::kGemma, {{"x", "gamma"}, {"yOut", "rstdOut"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kGemma, "x", x);
    core::require_not_null(ops::kGemma, "gamma", gamma);
    core::require_not_null(ops::kGemma, "yOut", yOut);
    core::require_not_null(ops::kGemma, "rstdOut", rstdOut);
    return std::make_unique<ops::RmsNormLaunch>(ops::kGemma, t.view("x", x), t.view("gamma", gamma), epsilon,
                                                t.view("yOut", yOut), t.view("rstdOut", rstdOut), 1.0);
  });
}

extern "C" aclnnStatus aclnnGemmaRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream) {
  return core::launch_executor(ops::kGemma, workspace, workspaceSize, executor);
}
