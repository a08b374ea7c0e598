// aclnnAddRmsNorm: validation (README.md), launch, native C++ API and C ABI. The rows, tiling and
// row arithmetic are aclnnRmsNorm's, shared through cpp/core/ (row_view.h, norm_checks.h,
// row_tiling.h, rms_row_math.h); only the residual add is this operator's.
#include <cstring>
#include <memory>

#include "aclnnop/aclnn_add_rms_norm.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/norm_checks.h"
#include "core/parallel.h"
#include "core/row_view.h"
#include "core/tensor.h"
#include "ops/norm/add_rms_norm/add_rms_norm_kernel.h"
#include "ops/norm/add_rms_norm/add_rms_norm_tiling.h"
#include "tilegrad/add_rms_norm.hpp"

namespace tilegrad::ops {
using core::RowView;
namespace norm = core::norm;

namespace {

constexpr const char* kOp = "aclnnAddRmsNorm";
// The vendor's hand-written aclnn layer checks shapes itself: 161002, not its tiling's 561002.
constexpr Status kShape = Status::kParamInvalid;

// Inputs alone: x1, x2 and gamma share one dtype (the vendor allows no float32 gamma here), x2 has
// x1's shape, gamma x1's trailing dims (empty x1 allowed: a no-op). Returns k = rank(gamma).
int validate_inputs(const TensorView& x1, const TensorView& x2, const TensorView& gamma) {
  core::require_well_formed(kOp, "x1", x1);
  core::require_well_formed(kOp, "x2", x2);
  core::require_well_formed(kOp, "gamma", gamma);
  core::require_dtype(kOp, "x1", x1, norm::kFloatTypes);
  core::require_same_dtype(kOp, "x2", x2, "x1", x1);
  core::require_same_dtype(kOp, "gamma", gamma, "x1", x1);
  norm::require_rank_1_to_8(kOp, "x1", x1, kShape);
  norm::check_shape_as(kShape, x2.shape == x1.shape, kOp, ": x2 shape must equal x1 shape ", shape_str(x1.shape),
                      ", got ", shape_str(x2.shape));
  return norm::require_gamma_shape(kOp, gamma, "x1", x1, kShape, true);
}

// The rules that depend on addresses: xOut and yOut may each be x1 or x2 itself (every input element
// is read before the same element of an output is written); nothing else shares memory.
void check_overlaps(const TensorView& x1, const TensorView& x2, const TensorView& gamma, const TensorView& y,
                    const TensorView& rstd, const TensorView& xo) {
  for (const auto& [name, out] : {std::pair{"yOut", &y}, {"xOut", &xo}}) {
    core::require_no_partial_overlap(kOp, name, *out, "x1", x1, true);
    core::require_no_partial_overlap(kOp, name, *out, "x2", x2, true);
    core::require_no_partial_overlap(kOp, name, *out, "gamma", gamma, false);
  }
  core::require_no_partial_overlap(kOp, "yOut", y, "xOut", xo, false);
  for (const auto& [name, t] : {std::pair{"x1", &x1}, {"x2", &x2}, {"gamma", &gamma}, {"yOut", &y}, {"xOut", &xo}})
    core::require_no_partial_overlap(kOp, "rstdOut", rstd, name, *t, false);
}

int validate(const TensorView& x1, const TensorView& x2, const TensorView& gamma, double eps, const TensorView& y,
             const TensorView& rstd, const TensorView& xo) {
  core::require_well_formed(kOp, "yOut", y);
  core::require_well_formed(kOp, "rstdOut", rstd);
  core::require_well_formed(kOp, "xOut", xo);
  const int k = validate_inputs(x1, x2, gamma);
  core::require_same_dtype(kOp, "yOut", y, "x1", x1);
  core::require_dtype(kOp, "rstdOut", rstd, {DType::kFloat32});
  core::require_same_dtype(kOp, "xOut", xo, "x1", x1);
  norm::check_shape_as(kShape, y.shape == x1.shape, kOp, ": yOut shape must equal x1 shape ", shape_str(x1.shape),
                      ", got ", shape_str(y.shape));
  norm::check_shape_as(kShape, xo.shape == x1.shape, kOp, ": xOut shape must equal x1 shape ", shape_str(x1.shape),
                      ", got ", shape_str(xo.shape));
  const std::vector<int64_t> rs = norm::rstd_shape(x1, k);
  norm::check_shape_as(kShape, rstd.shape == rs, kOp, ": rstdOut shape must be x1's leading dims then ones ",
                      shape_str(rs), ", got ", shape_str(rstd.shape));
  core::check(eps >= 0, kOp, ": epsilon must be >= 0, got ", eps);
  core::require_no_self_overlap(kOp, "yOut", y);
  core::require_no_self_overlap(kOp, "rstdOut", rstd);
  core::require_no_self_overlap(kOp, "xOut", xo);
  check_overlaps(x1, x2, gamma, y, rstd, xo);
  return k;
}

class AddRmsNormLaunch final : public core::Launch {
 public:
  AddRmsNormLaunch(const TensorView& x1, const TensorView& x2, const TensorView& gamma, double eps,
                   const TensorView& y, const TensorView& rstd, const TensorView& xo)
      : dtype_(x1.dtype), eps_(static_cast<float>(eps)) {
    const int k = validate(x1, x2, gamma, eps, y, rstd, xo);
    x1_ = RowView(x1, k);
    x2_ = RowView(x2, k);
    y_ = RowView(y, k);
    xo_ = RowView(xo, k);
    gamma_ = RowView(gamma, k);
    rstd_ = RowView(rstd, k);
    const int64_t cols = gamma.numel(), rows = cols > 0 ? norm::product(norm::leading(x1, k)) : 0;
    const bool pack = !x1_.dense() || !x2_.dense() || !y_.dense() || !xo_.dense();
    tiling_ = add_rms_norm_tiling(rows, cols, dtype_size(dtype_), pack, y_.dense(), core::Platform::current());
    kernel_ = add_rms_norm_kernel(tiling_.isa);
    trace_.record(kOp, {{"x1", &x1}, {"x2", &x2}, {"gamma", &gamma}, {"yOut", &y}, {"rstdOut", &rstd}, {"xOut", &xo}},
                  tiling_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &x1 = t["x1"], &x2 = t["x2"], &gamma = t["gamma"], &y = t["yOut"], &rstd = t["rstdOut"],
                     &xo = t["xOut"];
    check_overlaps(x1, x2, gamma, y, rstd, xo);
    x1_.bind(x1.data);
    x2_.bind(x2.data);
    gamma_.bind(gamma.data);
    y_.bind(y.data);
    rstd_.bind(rstd.data);
    xo_.bind(xo.data);
  }

  void run(void* workspace) override {
    const AddRmsNormTiling& t = tiling_;
    if (t.rows == 0) return;
    char* ws = static_cast<char*>(workspace);
    float* g = t.gamma(ws);
    gamma_.widen_to_float(0, dtype_, g);
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles(), t.threads, [&](int64_t tile) {
      // Packed rows: x1's scratch row becomes xOut's, x2's becomes y's (the kernel allows both aliases).
      char *s1 = t.scratch_row(ws, tile, 0), *s2 = t.scratch_row(ws, tile, 1);
      for (int64_t r = t.tile_begin(tile); r < t.tile_end(tile); ++r) {
        float rstd;
        if (t.pack_rows) {
          x1_.gather(r, s1);
          x2_.gather(r, s2);
          rstd = kernel_(dtype_, s1, s2, g, s1, s2, t.cols, eps_, inv_n, false);
          xo_.scatter(r, s1);
          y_.scatter(r, s2);
        } else {
          rstd = kernel_(dtype_, x1_.row(r), x2_.row(r), g, xo_.row(r), y_.row(r), t.cols, eps_, inv_n,
                         t.streaming_stores);
        }
        std::memcpy(rstd_.row(r), &rstd, 4);
      }
    });
  }

 private:
  DType dtype_;
  float eps_;
  RowView x1_, x2_, y_, xo_, gamma_, rstd_;
  AddRmsNormTiling tiling_;
  AddRmsNormRowFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

AddRmsNormOutputSpecs add_rms_norm_output_specs(const TensorView& x1, const TensorView& x2, const TensorView& gamma) {
  const int k = ops::validate_inputs(x1, x2, gamma);
  return {{x1.dtype, x1.shape}, {DType::kFloat32, core::norm::rstd_shape(x1, k)}, {x1.dtype, x1.shape}};
}

void add_rms_norm(const TensorView& x1, const TensorView& x2, const TensorView& gamma, double epsilon,
                  const TensorView& y, const TensorView& rstd, const TensorView& x_out) {
  ops::AddRmsNormLaunch launch(x1, x2, gamma, epsilon, y, rstd, x_out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma,
                                                       double epsilon, const aclTensor* yOut, const aclTensor* rstdOut,
                                                       const aclTensor* xOut, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"x1", "x2", "gamma"}, {"yOut", "rstdOut", "xOut"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    // Every output required, as the 8.5.0 document (README.md: the vendor's master code has modes
    // without rstdOut / xOut that tilegrad does not offer).
    core::require_not_null(ops::kOp, "x1", x1);
    core::require_not_null(ops::kOp, "x2", x2);
    core::require_not_null(ops::kOp, "gamma", gamma);
    core::require_not_null(ops::kOp, "yOut", yOut);
    core::require_not_null(ops::kOp, "rstdOut", rstdOut);
    core::require_not_null(ops::kOp, "xOut", xOut);
    return std::make_unique<ops::AddRmsNormLaunch>(t.view("x1", x1), t.view("x2", x2), t.view("gamma", gamma), epsilon,
                                                   t.view("yOut", yOut), t.view("rstdOut", rstdOut),
                                                   t.view("xOut", xOut));
  });
}

extern "C" aclnnStatus aclnnAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
