// aclnnLayerNormBackward: validation (layer_norm_backward.md), launch, native C++ API and C ABI.
#include <algorithm>
#include <cstring>
#include <memory>

#include "aclnnop/aclnn_layer_norm_backward.h"
#include "core/acl_objects.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/ordered_reduce.h"
#include "core/parallel.h"
#include "core/row_view.h"
#include "core/tensor.h"
#include "ops/norm/layer_norm/layer_norm_backward_kernel.h"
#include "ops/norm/layer_norm/layer_norm_checks.h"
#include "ops/norm/layer_norm/layer_norm_tiling.h"
#include "tilegrad/layer_norm.hpp"

namespace tilegrad::ops {
using core::RowView;

namespace {

constexpr const char* kOp = "aclnnLayerNormBackward";

struct Inputs {
  const TensorView &dy, &x, &mean, &rstd, &w, &b;
};
struct Outputs {
  const TensorView &dx, &dw, &db;
};

// The rules that depend on addresses: gradInputOut may be gradOut or input itself; nothing else
// shares memory with an output.
void check_overlaps(const Inputs& in, const Outputs& out) {
  const std::pair<const char*, const TensorView*> inputs[] = {{"gradOut", &in.dy}, {"input", &in.x},
                                                              {"mean", &in.mean},  {"rstd", &in.rstd},
                                                              {"weightOptional", &in.w}, {"biasOptional", &in.b}};
  const std::pair<const char*, const TensorView*> outputs[] = {
      {"gradInputOut", &out.dx}, {"gradWeightOut", &out.dw}, {"gradBiasOut", &out.db}};
  for (int o = 0; o < 3; ++o) {
    const auto& [oname, ov] = outputs[o];
    if (!core::present(*ov)) continue;
    for (const auto& [name, t] : inputs) {
      const bool exact_ok = o == 0 && (t == &in.dy || t == &in.x);
      if (core::present(*t)) core::require_no_partial_overlap(kOp, oname, *ov, name, *t, exact_ok);
    }
    for (int p = 0; p < o; ++p)
      if (core::present(*outputs[p].second))
        core::require_no_partial_overlap(kOp, oname, *ov, outputs[p].first, *outputs[p].second, false);
  }
}

// Inputs alone. Returns k = len(normalizedShape).
int validate_inputs(const Inputs& in, const std::vector<int64_t>& ns) {
  for (const auto& [name, t] : {std::pair{"gradOut", &in.dy}, {"input", &in.x}, {"mean", &in.mean}, {"rstd", &in.rstd}})
    core::require_well_formed(kOp, name, *t);
  const int k = ln::require_normalized_shape(kOp, "input", in.x, ns);
  core::require_same_dtype(kOp, "gradOut", in.dy, "input", in.x);
  core::check(in.dy.shape == in.x.shape, kOp, ": gradOut shape must equal input shape ", shape_str(in.x.shape),
              ", got ", shape_str(in.dy.shape));
  const std::vector<int64_t> lead(in.x.shape.begin(), in.x.shape.end() - k);
  ln::require_stats(kOp, "mean", in.mean, in.x, lead);
  ln::require_stats(kOp, "rstd", in.rstd, in.x, lead);
  core::require_same_dtype(kOp, "rstd", in.rstd, "mean", in.mean);
  ln::require_params(kOp, in.w, in.b, in.x, ns);
  return k;
}

// dweight / dbias: normalizedShape, float32 or the weight's dtype (input's without a weight).
void require_param_grad(const char* arg, const TensorView& g, const Inputs& in, const std::vector<int64_t>& ns) {
  core::require_well_formed(kOp, arg, g);
  const DType narrow = core::present(in.w) ? in.w.dtype : in.x.dtype;
  core::check(g.dtype == DType::kFloat32 || g.dtype == narrow, kOp, ": ", arg, " dtype must be float32 or ",
              dtype_name(narrow), ", got ", dtype_name(g.dtype));
  core::check(g.shape == ns, kOp, ": ", arg, " shape must equal normalizedShape ", shape_str(ns), ", got ",
              shape_str(g.shape));
  core::require_no_self_overlap(kOp, arg, g);
}

int validate(const Inputs& in, const std::vector<int64_t>& ns, const Outputs& out) {
  const int k = validate_inputs(in, ns);
  if (core::present(out.dx)) {
    core::require_well_formed(kOp, "gradInputOut", out.dx);
    core::require_same_dtype(kOp, "gradInputOut", out.dx, "input", in.x);
    core::check(out.dx.shape == in.x.shape, kOp, ": gradInputOut shape must equal input shape ",
                shape_str(in.x.shape), ", got ", shape_str(out.dx.shape));
    core::require_no_self_overlap(kOp, "gradInputOut", out.dx);
  }
  if (core::present(out.dw)) require_param_grad("gradWeightOut", out.dw, in, ns);
  if (core::present(out.db)) require_param_grad("gradBiasOut", out.db, in, ns);
  check_overlaps(in, out);
  return k;
}

class LayerNormBackwardLaunch final : public core::Launch {
 public:
  LayerNormBackwardLaunch(const Inputs& in, const std::vector<int64_t>& ns, const Outputs& out)
      : dtype_(in.x.dtype), stats_dtype_(in.mean.dtype) {
    const int k = validate(in, ns, out);
    const std::vector<int64_t> lead(in.x.shape.begin(), in.x.shape.end() - k);
    dy_ = RowView(in.dy, k);
    x_ = RowView(in.x, k);
    mean_ = RowView::per_row_scalar(in.mean, lead);
    rstd_ = RowView::per_row_scalar(in.rstd, lead);
    has_w_ = core::present(in.w);
    if (has_w_) w_ = RowView(in.w, k), w_dtype_ = in.w.dtype;
    has_dx_ = core::present(out.dx);
    has_dw_ = core::present(out.dw);
    has_db_ = core::present(out.db);
    if (has_dx_) dx_ = RowView(out.dx, k);
    if (has_dw_) dw_ = RowView(out.dw, k), dw_dtype_ = out.dw.dtype;
    if (has_db_) db_ = RowView(out.db, k), db_dtype_ = out.db.dtype;
    const bool pack = !dy_.dense() || !x_.dense() || (has_dx_ && !dx_.dense());
    tiling_ = layer_norm_backward_tiling(ln::product(lead), ln::product(ns), dtype_size(dtype_), pack,
                                         !has_dx_ || dx_.dense(), core::Platform::current());
    kernel_ = layer_norm_backward_kernel(tiling_.isa);
    trace_.record(kOp,
                  {{"gradOut", &in.dy}, {"input", &in.x}, {"mean", &in.mean}, {"rstd", &in.rstd},
                   {"weightOptional", &in.w}, {"biasOptional", &in.b}, {"gradInputOut", &out.dx},
                   {"gradWeightOut", &out.dw}, {"gradBiasOut", &out.db}},
                  tiling_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const Inputs in{t["gradOut"], t["input"], t["mean"], t["rstd"], t["weightOptional"], t["biasOptional"]};
    // outputs the mask leaves out were never recorded: they bind as absent, as planned
    const Outputs out{has_dx_ ? t["gradInputOut"] : kAbsent, has_dw_ ? t["gradWeightOut"] : kAbsent,
                      has_db_ ? t["gradBiasOut"] : kAbsent};
    check_overlaps(in, out);
    dy_.bind(in.dy.data);
    x_.bind(in.x.data);
    mean_.bind(in.mean.data);
    rstd_.bind(in.rstd.data);
    w_.bind(in.w.data);
    dx_.bind(out.dx.data);
    dw_.bind(out.dw.data);
    db_.bind(out.db.data);
  }

  void run(void* workspace) override {
    const LayerNormBackwardTiling& t = tiling_;
    if (t.cols == 0 || !(has_dx_ || has_dw_ || has_db_)) return;
    if (t.rows == 0) return zero_param_grads();
    char* ws = static_cast<char*>(workspace);
    float* w = t.weight(ws);
    if (has_w_) w_.widen_to_float(0, w_dtype_, w);
    else std::fill(w, w + t.cols, 1.0f);
    const bool params = has_dw_ || has_db_;
    char *pw_all = t.weight_partials(ws), *pb_all = t.bias_partials(ws);
    const float inv_n = 1.0f / static_cast<float>(t.cols);
    core::parallel_for(t.num_tiles(), t.threads, [&](int64_t blk) {
      char *sdy = t.scratch_row(ws, blk, 0), *sx = t.scratch_row(ws, blk, 1), *sdx = t.scratch_row(ws, blk, 2);
      float* pw = params ? t.tiles.partial(pw_all, blk) : nullptr;
      float* pb = params ? t.tiles.partial(pb_all, blk) : nullptr;
      if (params) std::memset(pw, 0, t.cols * sizeof(float)), std::memset(pb, 0, t.cols * sizeof(float));
      // rows are gathered only when a sweep is one row (tiling.sweep_rows)
      core::for_each_sweep(
          t, blk,
          [&](core::RowSweep& s, int64_t j, int64_t r) {
            s.dy[j] = dy_.readable_row(r, sdy);
            s.x[j] = x_.readable_row(r, sx);
            s.dx[j] = !has_dx_ ? nullptr : dx_.dense() ? dx_.row(r) : sdx;
            s.extra[j] = nullptr;
            s.mean[j] = static_cast<float>(core::load_float_element(stats_dtype_, mean_.row(r)));
            s.rstd[j] = static_cast<float>(core::load_float_element(stats_dtype_, rstd_.row(r)));
          },
          [&](const core::RowSweep& s, int64_t r0) {
            kernel_(dtype_, s, w, pw, pb, t.cols, inv_n, t.streaming_stores);
            if (has_dx_ && !dx_.dense()) dx_.scatter(r0, sdx);
          });
    });
    float* sums = t.sums(ws);
    if (has_dw_) store_param_grad(pw_all, sums, dw_, dw_dtype_);
    if (has_db_) store_param_grad(pb_all, sums + t.cols, db_, db_dtype_);
  }

 private:
  // The blocks' partials summed in block order into `sums` (fp32), then stored into the output.
  void store_param_grad(const char* partials, float* sums, const RowView& out, DType dtype) const {
    core::sum_row_block_partials(tiling_.tiles, partials, sums, tiling_.threads);
    out.for_each(0, [&](int64_t i, char* p) { ln::store_float_as(dtype, sums[i], p); });
  }
  // No rows: the sums over no row are zero (the vendor fills them too).
  void zero_param_grads() const {
    if (has_dw_) dw_.for_each(0, [&](int64_t, char* p) { ln::store_float_as(dw_dtype_, 0.0f, p); });
    if (has_db_) db_.for_each(0, [&](int64_t, char* p) { ln::store_float_as(db_dtype_, 0.0f, p); });
  }

  static inline const TensorView kAbsent{};
  DType dtype_, stats_dtype_, w_dtype_ = DType::kFloat32, dw_dtype_ = DType::kFloat32, db_dtype_ = DType::kFloat32;
  bool has_w_ = false, has_dx_ = false, has_dw_ = false, has_db_ = false;
  RowView dy_, x_, mean_, rstd_, w_, dx_, dw_, db_;
  LayerNormBackwardTiling tiling_;
  LayerNormBackwardSweepFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

LayerNormBackwardOutputSpecs layer_norm_backward_output_specs(const TensorView& x,
                                                              const std::vector<int64_t>& normalized_shape) {
  core::require_well_formed(ops::kOp, "input", x);
  ops::ln::require_normalized_shape(ops::kOp, "input", x, normalized_shape);
  return {{x.dtype, x.shape}, {DType::kFloat32, normalized_shape}, {DType::kFloat32, normalized_shape}};
}

void layer_norm_backward(const TensorView& dy, const TensorView& x, const std::vector<int64_t>& normalized_shape,
                         const TensorView& mean, const TensorView& rstd, const TensorView& weight,
                         const TensorView& bias, const TensorView& dx, const TensorView& dweight,
                         const TensorView& dbias) {
  ops::LayerNormBackwardLaunch launch({dy, x, mean, rstd, weight, bias}, normalized_shape, {dx, dweight, dbias});
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* mean,
    const aclTensor* rstd, const aclTensor* weightOptional, const aclTensor* biasOptional,
    const aclBoolArray* outputMask, aclTensor* gradInputOut, aclTensor* gradWeightOut, aclTensor* gradBiasOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  constexpr const char* op = ops::kOp;
  return core::create_executor(
      op,
      {{"gradOut", "input", "mean", "rstd", "weightOptional", "biasOptional"},
       {"gradInputOut", "gradWeightOut", "gradBiasOut"}},
      workspaceSize, executor, [&](core::ExecutorTensors& t) {
        core::require_not_null(op, "gradOut", gradOut);
        core::require_not_null(op, "input", input);
        core::require_not_null(op, "normalizedShape", normalizedShape);
        core::require_not_null(op, "mean", mean);
        core::require_not_null(op, "rstd", rstd);
        core::require_not_null(op, "outputMask", outputMask);
        const std::vector<bool>& mask = outputMask->values;
        core::check(mask.size() == 3, op, ": outputMask must have 3 entries, got ", mask.size());
        const char* names[] = {"gradInputOut", "gradWeightOut", "gradBiasOut"};
        const aclTensor* outs[] = {gradInputOut, gradWeightOut, gradBiasOut};
        TensorView views[3];
        for (int i = 0; i < 3; ++i) {
          if (!mask[i]) continue;  // not computed: the tensor, if any, is left alone
          core::require_not_null(op, names[i], outs[i]);
          views[i] = t.view(names[i], outs[i]);
        }
        const TensorView dy = t.view("gradOut", gradOut), x = t.view("input", input), m = t.view("mean", mean),
                         r = t.view("rstd", rstd), w = t.optional_view("weightOptional", weightOptional),
                         b = t.optional_view("biasOptional", biasOptional);
        return std::make_unique<ops::LayerNormBackwardLaunch>(ops::Inputs{dy, x, m, r, w, b}, normalizedShape->values,
                                                              ops::Outputs{views[0], views[1], views[2]});
      });
}

extern "C" aclnnStatus aclnnLayerNormBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                              aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
