// aclnnLayerNorm: validation (README.md), launch, native C++ API and C ABI.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "aclnnop/aclnn_layer_norm.h"
#include "core/acl_objects.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/row_view.h"
#include "core/tensor.h"
#include "ops/norm/layer_norm/layer_norm_checks.h"
#include "ops/norm/layer_norm/layer_norm_kernel.h"
#include "ops/norm/layer_norm/layer_norm_tiling.h"
#include "tilegrad/layer_norm.hpp"

namespace tilegrad::ops {
using core::RowView;

namespace {

constexpr const char* kOp = "aclnnLayerNorm";

// The rules that depend on addresses: out may be input itself (in place); nothing else shares memory.
void check_overlaps(const TensorView& x, const TensorView& w, const TensorView& b, const TensorView& out,
                    const TensorView& mean, const TensorView& rstd) {
  core::require_no_partial_overlap(kOp, "out", out, "input", x, true);
  for (const auto& [name, t] : {std::pair{"weightOptional", &w}, {"biasOptional", &b}})
    if (core::present(*t)) core::require_no_partial_overlap(kOp, "out", out, name, *t, false);
  for (const auto& [oname, o] : {std::pair{"meanOutOptional", &mean}, {"rstdOutOptional", &rstd}}) {
    if (!core::present(*o)) continue;
    for (const auto& [name, t] : {std::pair{"input", &x}, {"weightOptional", &w}, {"biasOptional", &b}, {"out", &out}})
      if (core::present(*t)) core::require_no_partial_overlap(kOp, oname, *o, name, *t, false);
  }
  if (core::present(mean) && core::present(rstd))
    core::require_no_partial_overlap(kOp, "rstdOutOptional", rstd, "meanOutOptional", mean, false);
}

// Returns k = len(normalizedShape).
int validate(const TensorView& x, const std::vector<int64_t>& ns, const TensorView& w, const TensorView& b, double eps,
             const TensorView& out, const TensorView& mean, const TensorView& rstd) {
  core::require_well_formed(kOp, "input", x);
  core::require_well_formed(kOp, "out", out);
  const int k = ln::require_normalized_shape(kOp, "input", x, ns);
  ln::require_params(kOp, w, b, x, ns);
  core::require_same_dtype(kOp, "out", out, "input", x);
  core::check(out.shape == x.shape, kOp, ": out shape must equal input shape ", shape_str(x.shape), ", got ",
              shape_str(out.shape));
  const std::vector<int64_t> lead(x.shape.begin(), x.shape.end() - k);
  if (core::present(mean)) ln::require_stats(kOp, "meanOutOptional", mean, x, lead);
  if (core::present(rstd)) ln::require_stats(kOp, "rstdOutOptional", rstd, x, lead);
  core::check(std::isfinite(eps) && eps >= 0, kOp, ": eps must be finite and >= 0, got ", eps);
  core::require_no_self_overlap(kOp, "out", out);
  if (core::present(mean)) core::require_no_self_overlap(kOp, "meanOutOptional", mean);
  if (core::present(rstd)) core::require_no_self_overlap(kOp, "rstdOutOptional", rstd);
  check_overlaps(x, w, b, out, mean, rstd);
  return k;
}

class LayerNormLaunch final : public core::Launch {
 public:
  LayerNormLaunch(const TensorView& x, const std::vector<int64_t>& ns, const TensorView& w, const TensorView& b,
                  double eps, const TensorView& out, const TensorView& mean, const TensorView& rstd)
      : dtype_(x.dtype), eps_(static_cast<float>(eps)) {
    const int k = validate(x, ns, w, b, eps, out, mean, rstd);
    x_ = RowView(x, k);
    y_ = RowView(out, k);
    has_w_ = core::present(w);
    has_b_ = core::present(b);
    if (has_w_) w_ = RowView(w, k), w_dtype_ = w.dtype;
    if (has_b_) b_ = RowView(b, k), b_dtype_ = b.dtype;
    const std::vector<int64_t> lead(x.shape.begin(), x.shape.end() - k);
    has_mean_ = core::present(mean);
    has_rstd_ = core::present(rstd);
    if (has_mean_) mean_ = RowView::per_row_scalar(mean, lead), mean_dtype_ = mean.dtype;
    if (has_rstd_) rstd_ = RowView::per_row_scalar(rstd, lead), rstd_dtype_ = rstd.dtype;
    tiling_ = layer_norm_tiling(ln::product(lead), ln::product(ns), dtype_size(dtype_), !x_.dense() || !y_.dense(),
                                y_.dense(), core::Platform::current());
    kernel_ = layer_norm_kernel(tiling_.isa);
    trace_.record(kOp,
                  {{"input", &x}, {"weightOptional", &w}, {"biasOptional", &b}, {"out", &out},
                   {"meanOutOptional", &mean}, {"rstdOutOptional", &rstd}},
                  tiling_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &x = t["input"], &w = t["weightOptional"], &b = t["biasOptional"], &out = t["out"],
                     &mean = t["meanOutOptional"], &rstd = t["rstdOutOptional"];
    check_overlaps(x, w, b, out, mean, rstd);
    x_.bind(x.data);
    y_.bind(out.data);
    w_.bind(w.data);
    b_.bind(b.data);
    mean_.bind(mean.data);
    rstd_.bind(rstd.data);
  }

  void run(void* workspace) override {
    const LayerNormTiling& t = tiling_;
    if (t.rows == 0) return;
    if (t.cols == 0) return write_empty_row_stats();
    char* ws = static_cast<char*>(workspace);
    float *w = t.weight(ws), *b = t.bias(ws);
    widen_or_fill(w_, has_w_, w_dtype_, 1.0f, w);
    widen_or_fill(b_, has_b_, b_dtype_, 0.0f, b);
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles(), t.threads, [&](int64_t tile) {
      char *sx = t.scratch_row(ws, tile, 0), *sy = t.scratch_row(ws, tile, 1);
      for (int64_t r = t.tile_begin(tile); r < t.tile_end(tile); ++r) {
        const char* xr = x_.row(r);
        if (!x_.dense()) x_.gather(r, sx), xr = sx;
        char* yr = y_.dense() ? y_.row(r) : sy;
        float stats[2];
        kernel_(dtype_, xr, w, b, yr, t.cols, eps_, inv_n, t.streaming_stores, stats);
        if (!y_.dense()) y_.scatter(r, sy);
        store_stats(r, stats[0], stats[1]);
      }
    });
  }

 private:
  void widen_or_fill(const RowView& v, bool present, DType dtype, float fill, float* out) const {
    if (present) v.widen_to_float(0, dtype, out);
    else std::fill(out, out + tiling_.cols, fill);
  }
  void store_stats(int64_t r, float mean, float rstd) const {
    if (has_mean_) ln::store_float_as(mean_dtype_, mean, mean_.row(r));
    if (has_rstd_) ln::store_float_as(rstd_dtype_, rstd, rstd_.row(r));
  }
  // N = 0: nothing to normalise; the mean of no element is 0 and rstd NaN (the vendor's kernels).
  void write_empty_row_stats() const {
    for (int64_t r = 0; r < tiling_.rows; ++r) store_stats(r, 0.0f, std::numeric_limits<float>::quiet_NaN());
  }

  DType dtype_, w_dtype_ = DType::kFloat32, b_dtype_ = DType::kFloat32, mean_dtype_ = DType::kFloat32,
                rstd_dtype_ = DType::kFloat32;
  float eps_;
  bool has_w_ = false, has_b_ = false, has_mean_ = false, has_rstd_ = false;
  RowView x_, y_, w_, b_, mean_, rstd_;
  LayerNormTiling tiling_;
  LayerNormRowFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

LayerNormOutputSpecs layer_norm_output_specs(const TensorView& x, const std::vector<int64_t>& normalized_shape) {
  core::require_well_formed(ops::kOp, "input", x);
  const int k = ops::ln::require_normalized_shape(ops::kOp, "input", x, normalized_shape);
  std::vector<int64_t> stats(x.shape.begin(), x.shape.end() - k);
  stats.resize(x.shape.size(), 1);
  return {{x.dtype, x.shape}, {DType::kFloat32, stats}, {DType::kFloat32, stats}};
}

void layer_norm(const TensorView& x, const std::vector<int64_t>& normalized_shape, const TensorView& weight,
                const TensorView& bias, double eps, const TensorView& out, const TensorView& mean,
                const TensorView& rstd) {
  ops::LayerNormLaunch launch(x, normalized_shape, weight, bias, eps, out, mean, rstd);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input, const aclIntArray* normalizedShape,
                                                      const aclTensor* weightOptional, const aclTensor* biasOptional,
                                                      double eps, aclTensor* out, aclTensor* meanOutOptional,
                                                      aclTensor* rstdOutOptional, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return core::create_executor(
      ops::kOp, {{"input", "weightOptional", "biasOptional"}, {"out", "meanOutOptional", "rstdOutOptional"}},
      workspaceSize, executor, [&](core::ExecutorTensors& t) {
        core::require_not_null(ops::kOp, "input", input);
        core::require_not_null(ops::kOp, "normalizedShape", normalizedShape);
        core::require_not_null(ops::kOp, "out", out);
        return std::make_unique<ops::LayerNormLaunch>(
            t.view("input", input), normalizedShape->values, t.optional_view("weightOptional", weightOptional),
            t.optional_view("biasOptional", biasOptional), eps, t.view("out", out),
            t.optional_view("meanOutOptional", meanOutOptional), t.optional_view("rstdOutOptional", rstdOutOptional));
      });
}

extern "C" aclnnStatus aclnnLayerNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
