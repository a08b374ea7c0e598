// aclnnRmsNorm: validation (README.md), launch, native C++ API and C ABI.
#include <cmath>
#include <memory>

#include "aclnnop/aclnn_rms_norm.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/norm/rms_norm/rms_norm_checks.h"
#include "ops/norm/rms_norm/rms_norm_kernel.h"
#include "ops/norm/rms_norm/rms_norm_rows.h"
#include "ops/norm/rms_norm/rms_norm_tiling.h"
#include "tilegrad/rms_norm.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnRmsNorm";

void require_input_dtypes(const TensorView& x, const TensorView& gamma) {
  core::require_dtype(kOp, "x", x, rms::kFloatTypes);
  rms::require_gamma_dtype(kOp, gamma, x);
}

// x's rank and gamma's shape. Returns k = rank(gamma).
int require_input_shapes(const TensorView& x, const TensorView& gamma) {
  rms::require_rank_1_to_8(kOp, "x", x);
  return rms::require_gamma_shape(kOp, gamma, "x", x);
}

// Inputs alone: dtypes, ranks, gamma's shape. Returns k = rank(gamma).
int validate_inputs(const TensorView& x, const TensorView& gamma) {
  core::require_well_formed(kOp, "x", x);
  core::require_well_formed(kOp, "gamma", gamma);
  require_input_dtypes(x, gamma);
  return require_input_shapes(x, gamma);
}

// The rules that depend on addresses: yOut may be x itself (in place); nothing else shares memory.
void check_overlaps(const TensorView& x, const TensorView& gamma, const TensorView& y, const TensorView& rstd) {
  core::require_no_partial_overlap(kOp, "yOut", y, "x", x, true);
  core::require_no_partial_overlap(kOp, "yOut", y, "gamma", gamma, false);
  core::require_no_partial_overlap(kOp, "rstdOut", rstd, "x", x, false);
  core::require_no_partial_overlap(kOp, "rstdOut", rstd, "gamma", gamma, false);
  core::require_no_partial_overlap(kOp, "rstdOut", rstd, "yOut", y, false);
}

int validate(const TensorView& x, const TensorView& gamma, double eps, const TensorView& y, const TensorView& rstd) {
  core::require_well_formed(kOp, "x", x);
  core::require_well_formed(kOp, "gamma", gamma);
  core::require_well_formed(kOp, "yOut", y);
  core::require_well_formed(kOp, "rstdOut", rstd);
  require_input_dtypes(x, gamma);
  core::require_same_dtype(kOp, "yOut", y, "x", x);
  core::require_dtype(kOp, "rstdOut", rstd, {DType::kFloat32});
  const int k = require_input_shapes(x, gamma);
  rms::check_shape(y.shape == x.shape, kOp, ": yOut shape must equal x shape ", shape_str(x.shape), ", got ",
                   shape_str(y.shape));
  const std::vector<int64_t> rs = rms::rstd_shape(x, k);
  rms::check_shape(rstd.shape == rs, kOp, ": rstdOut shape must be x's leading dims then ones ", shape_str(rs),
                   ", got ", shape_str(rstd.shape));
  rms::check_shape(eps >= 0, kOp, ": epsilon must be >= 0, got ", eps);
  core::require_no_self_overlap(kOp, "yOut", y);
  core::require_no_self_overlap(kOp, "rstdOut", rstd);
  check_overlaps(x, gamma, y, rstd);
  return k;
}

class RmsNormLaunch final : public core::Launch {
 public:
  RmsNormLaunch(const TensorView& x, const TensorView& gamma, double eps, const TensorView& y, const TensorView& rstd)
      : dtype_(x.dtype), eps_(static_cast<float>(eps)) {
    const int k = validate(x, gamma, eps, y, rstd);
    x_ = RowView(x, k);
    y_ = RowView(y, k);
    gamma_ = RowView(gamma, k);
    gamma_dtype_ = gamma.dtype;
    rstd_ = RowView(rstd, k);
    const int64_t rows = rms::product(rms::leading(x, k)), cols = gamma.numel();
    tiling_ = rms_norm_tiling(rows, cols, dtype_size(x.dtype), !x_.dense() || !y_.dense(), y_.dense(),
                              core::Platform::current());
    kernel_ = rms_norm_kernel(tiling_.isa);
    trace_.record(kOp, {{"x", &x}, {"gamma", &gamma}, {"yOut", &y}, {"rstdOut", &rstd}}, tiling_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &x = t["x"], &gamma = t["gamma"], &y = t["yOut"], &rstd = t["rstdOut"];
    check_overlaps(x, gamma, y, rstd);
    x_.bind(x.data);
    gamma_.bind(gamma.data);
    y_.bind(y.data);
    rstd_.bind(rstd.data);
  }

  void run(void* workspace) override {
    const RmsNormTiling& t = tiling_;
    if (t.rows == 0) return;
    char* ws = static_cast<char*>(workspace);
    float* g = reinterpret_cast<float*>(ws + t.gamma_offset);
    gamma_.widen_to_float(0, gamma_dtype_, g);
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles, t.threads, [&](int64_t tile) {
      char* sx = ws + t.scratch_offset + tile * t.scratch_bytes_per_tile;
      char* sy = sx + t.scratch_row_bytes;
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
  DType dtype_, gamma_dtype_ = DType::kFloat32;
  float eps_;
  RowView x_, y_, gamma_, rstd_;
  RmsNormTiling tiling_;
  RmsNormRowFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

RmsNormOutputSpecs rms_norm_output_specs(const TensorView& x, const TensorView& gamma) {
  const int k = ops::validate_inputs(x, gamma);
  return {{x.dtype, x.shape}, {DType::kFloat32, ops::rms::rstd_shape(x, k)}};
}

void rms_norm(const TensorView& x, const TensorView& gamma, double epsilon, const TensorView& y,
              const TensorView& rstd) {
  ops::RmsNormLaunch launch(x, gamma, epsilon, y, rstd);
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
    return std::make_unique<ops::RmsNormLaunch>(t.view("x", x), t.view("gamma", gamma), epsilon, t.view("yOut", yOut),
                                                t.view("rstdOut", rstdOut));
  });
}

extern "C" aclnnStatus aclnnRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
