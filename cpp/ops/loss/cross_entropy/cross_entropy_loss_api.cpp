// aclnnCrossEntropyLoss: validation (specification sections 0 and 3), launch, native C++ API and C ABI.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "core/vec1.h"
#include "core/workspace.h"
#include "ops/loss/cross_entropy/cross_entropy_common.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_kernel.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_tiling.h"
#include "tilegrad/cross_entropy.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnCrossEntropyLoss";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct LossArgs {
  TensorView input, target, weight, loss, log_prob, zloss, lse;
  ce::Attributes attr;
  // Outputs the C ABI passes but that are not used (z-loss off and not requested: the vendor's
  // document makes them None then): only their dtype is checked, nothing is written to them.
  std::vector<std::pair<const char*, DType>> unused_outputs;
};

using core::present;

void require_input_dtype(const char* arg, const TensorView& t, const TensorView& input) {
  core::require_same_dtype(kOp, arg, t, "input", input);
}

void validate_inputs(const TensorView& input, const TensorView& target, const TensorView& weight) {
  core::require_well_formed(kOp, "input", input);
  core::require_well_formed(kOp, "target", target);
  if (present(weight)) core::require_well_formed(kOp, "weightOptional", weight);
  core::require_dtype(kOp, "input", input, kFloatTypes);
  core::require_dtype(kOp, "target", target, {DType::kInt64, DType::kInt32});
  if (present(weight)) core::require_dtype(kOp, "weightOptional", weight, {DType::kFloat32});
  core::require_rank(kOp, "input", input, 2, 2);
  core::require_rank(kOp, "target", target, 1, 1);
  if (present(weight)) core::require_rank(kOp, "weightOptional", weight, 1, 1);
  core::require_shape(kOp, "target", target, {input.shape[0]}, "input shape[0] (N)");
  if (present(weight)) core::require_shape(kOp, "weightOptional", weight, {input.shape[1]}, "input shape[1] (C)");
}

// Overlaps: every output alone (with_self; strides only), against the other outputs and against the
// inputs (addresses: checked again when the launch is bound to new ones).
void check_overlaps(const LossArgs& a, bool with_self) {
  const std::pair<const char*, const TensorView*> outs[] = {
      {"lossOut", &a.loss}, {"logProbOut", &a.log_prob}, {"zlossOut", &a.zloss}, {"lseForZlossOut", &a.lse}};
  const std::pair<const char*, const TensorView*> ins[] = {
      {"input", &a.input}, {"target", &a.target}, {"weightOptional", &a.weight}};
  for (size_t k = 0; k < 4; ++k) {
    if (!present(*outs[k].second)) continue;
    // (an empty view cannot overlap itself; NumPy gives empty arrays zero strides)
    if (with_self && outs[k].second->numel() > 0) core::require_no_self_overlap(kOp, outs[k].first, *outs[k].second);
    for (const auto& in : ins)
      if (present(*in.second))
        core::require_no_partial_overlap(kOp, outs[k].first, *outs[k].second, in.first, *in.second, false);
    for (size_t m = k + 1; m < 4; ++m)
      if (present(*outs[m].second))
        core::require_no_partial_overlap(kOp, outs[k].first, *outs[k].second, outs[m].first, *outs[m].second, false);
  }
}

Reduction validate(const LossArgs& a) {
  const bool has_w = present(a.weight), has_z = present(a.zloss), has_lse = present(a.lse);
  core::require_well_formed(kOp, "input", a.input);
  core::require_well_formed(kOp, "target", a.target);
  core::require_well_formed(kOp, "lossOut", a.loss);
  core::require_well_formed(kOp, "logProbOut", a.log_prob);
  if (has_w) core::require_well_formed(kOp, "weightOptional", a.weight);
  if (has_z) core::require_well_formed(kOp, "zlossOut", a.zloss);
  if (has_lse) core::require_well_formed(kOp, "lseForZlossOut", a.lse);
  // dtypes
  core::require_dtype(kOp, "input", a.input, kFloatTypes);
  core::require_dtype(kOp, "target", a.target, {DType::kInt64, DType::kInt32});
  if (has_w) core::require_dtype(kOp, "weightOptional", a.weight, {DType::kFloat32});
  require_input_dtype("lossOut", a.loss, a.input);
  require_input_dtype("logProbOut", a.log_prob, a.input);
  if (has_z) require_input_dtype("zlossOut", a.zloss, a.input);
  if (has_lse) require_input_dtype("lseForZlossOut", a.lse, a.input);
  for (const auto& [name, dtype] : a.unused_outputs) {
    TensorView dtype_only;
    dtype_only.dtype = dtype;
    require_input_dtype(name, dtype_only, a.input);
  }
  // ranks
  core::require_rank(kOp, "input", a.input, 2, 2);
  core::require_rank(kOp, "target", a.target, 1, 1);
  if (has_w) core::require_rank(kOp, "weightOptional", a.weight, 1, 1);
  core::require_rank(kOp, "lossOut", a.loss, 0, 1);
  core::require_rank(kOp, "logProbOut", a.log_prob, 2, 2);
  if (has_z) core::require_rank(kOp, "zlossOut", a.zloss, 0, 1);
  if (has_lse) core::require_rank(kOp, "lseForZlossOut", a.lse, 1, 1);
  // shapes
  const int64_t n = a.input.shape[0], c = a.input.shape[1];
  core::require_shape(kOp, "target", a.target, {n}, "input shape[0] (N)");
  if (has_w) core::require_shape(kOp, "weightOptional", a.weight, {c}, "input shape[1] (C)");
  core::require_shape(kOp, "logProbOut", a.log_prob, a.input.shape, "input shape");
  if (has_lse) core::require_shape(kOp, "lseForZlossOut", a.lse, {n}, "input shape[0] (N)");
  ce::require_loss_shapes(kOp, a.attr.reduction, n, {{"lossOut", &a.loss}, {"zlossOut", has_z ? &a.zloss : nullptr}});
  // attributes
  const Reduction r = ce::require_attributes(kOp, a.attr);
  check_overlaps(a, true);
  return r;
}

class CrossEntropyLossLaunch final : public core::Launch {
 public:
  explicit CrossEntropyLossLaunch(const LossArgs& a) : a_(a) {
    red_ = validate(a_);
    if (!present(a_.weight)) a_.weight = TensorView{};
    if (!present(a_.zloss)) a_.zloss = TensorView{};
    if (!present(a_.lse)) a_.lse = TensorView{};
    rows_ = a_.input.shape[0];
    cols_ = a_.input.shape[1];
    es_ = dtype_size(a_.input.dtype);
    in_contiguous_ = cols_ <= 1 || a_.input.strides[1] == 1;
    out_contiguous_ = cols_ <= 1 || a_.log_prob.strides[1] == 1;
    tiling_ = cross_entropy_loss_tiling(rows_, cols_, es_, es_, out_contiguous_, core::Platform::current());
    stats_ = cross_entropy_loss_stats_kernel(tiling_.isa);
    log_prob_ = cross_entropy_loss_log_prob_kernel(tiling_.isa);
    want_wx_ = a_.attr.label_smoothing > 0;
    // Whole contiguous rows in one chunk: row i's logProb is written during row i+1's exp pass, so
    // the memory writes overlap the exp work (~25% faster for fp32 at N=8192, C=32000). Not for bf16:
    // its exact rounding inside the exp loop costs more than the overlap gains (the separate pass
    // uses vcvtneps2bf16).
    fused_ = tiling_.num_chunks == 1 && in_contiguous_ && out_contiguous_ && a_.input.dtype != DType::kBFloat16;
    // workspace: per-row loss, z-term and lse (doubles) | contiguous weight | per-tile gather buffers
    // Every size checked: a workspace that does not fit int64 is a 161002, never a wrapped size.
    core::WorkspaceLayout layout(kOp);
    layout.take("workspace per-row sums", rows_, 3 * 8);
    bytes_rows_ = static_cast<uint64_t>(layout.bytes());
    if (want_wx_ && ce::weight_needs_copy(a_.weight)) layout.take("workspace weight copy", cols_, 4);
    bytes_weight_ = static_cast<uint64_t>(layout.bytes()) - bytes_rows_;
    bytes_tile_ = (in_contiguous_ && out_contiguous_)
                      ? 0
                      : static_cast<uint64_t>(core::aligned_bytes(kOp, "workspace tile buffers", tiling_.chunk_cols, es_ * 2));
    layout.take("workspace tile buffers", tiling_.num_tiles, static_cast<int64_t>(bytes_tile_));
    workspace_bytes_ = static_cast<uint64_t>(layout.bytes());
    trace_.record(kOp, {{"input", &a_.input}, {"target", &a_.target}, {"weightOptional", &a_.weight},
                        {"lossOut", &a_.loss}, {"logProbOut", &a_.log_prob}, {"zlossOut", &a_.zloss},
                        {"lseForZlossOut", &a_.lse}}, tiling_);
    trace_.field("fused_log_prob", fused_);  // logProb written during the next row's exp pass
  }

  uint64_t workspace_bytes() const override { return workspace_bytes_; }

  void bind(const core::Operands& t) override {
    LossArgs a = a_;
    t.bind({{"input", &a.input}, {"target", &a.target}, {"weightOptional", &a.weight}, {"lossOut", &a.loss},
            {"logProbOut", &a.log_prob}, {"zlossOut", &a.zloss}, {"lseForZlossOut", &a.lse}});
    check_overlaps(a, false);
    a_ = a;
  }

  void run(void* workspace) override {
    char* ws = static_cast<char*>(workspace);
    double* row_loss = reinterpret_cast<double*>(ws);
    double* row_z = row_loss + rows_;
    double* row_lse = row_z + rows_;
    float* wbuf = reinterpret_cast<float*>(ws + bytes_rows_);
    char* tile_bufs = ws + bytes_rows_ + bytes_weight_;
    // Serial, row-ordered: every target checked (lowest bad row reported), divisors reduced.
    const ce::TargetScan scan = ce::scan_targets(kOp, a_.target, a_.weight, cols_, a_.attr.ignore_index);
    const double ls = a_.attr.label_smoothing, z = a_.attr.zscale;
    const double wtotal = want_wx_ ? ce::weight_total(a_.weight, cols_) : 0.0;
    const float* w = want_wx_ ? ce::contiguous_weight(a_.weight, cols_, wbuf) : nullptr;
    const auto& t = tiling_;
    core::parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
      char* gather = tile_bufs + tile * bytes_tile_;
      char* scatter = gather + t.chunk_cols * es_;
      const int64_t r0 = tile * t.rows_per_tile, r1 = std::min(rows_, r0 + t.rows_per_tile);
      for (int64_t i = r0; i < r1; ++i) row(i, r0, r1, w, wtotal, ls, z, gather, scatter, row_loss, row_z, row_lse);
      if (fused_ && r1 > r0)  // the tile's last row: its logProb was not written by a later row's exp pass
        log_prob_(a_.input.dtype, in_elem(r1 - 1, 0), out_row(r1 - 1), cols_, static_cast<float>(row_lse[r1 - 1]),
                  t.streaming_stores);
    });
    finish(scan, row_loss, row_z, row_lse);
  }

 private:
  const char* in_elem(int64_t i, int64_t j) const {
    return static_cast<const char*>(a_.input.data) + (i * a_.input.strides[0] + j * a_.input.strides[1]) * es_;
  }

  char* out_row(int64_t i) const { return static_cast<char*>(a_.log_prob.data) + i * a_.log_prob.strides[0] * es_; }

  void row(int64_t i, int64_t row_begin, int64_t row_end, const float* w, double wtotal, double ls, double z,
           char* gather, char* scatter, double* row_loss, double* row_z, double* row_lse) const {
    const DType dt = a_.input.dtype;
    const auto& t = tiling_;
    const int64_t in_s1 = cols_ > 0 ? a_.input.strides[1] * es_ : 0;
    char* const out_i = out_row(i);
    const int64_t out_s1 = cols_ > 0 ? a_.log_prob.strides[1] * es_ : 0;
    // Chunk j0.. of the row as contiguous memory (gathered when strided).
    auto chunk_in = [&](int64_t j0, int64_t n) -> const char* {
      if (in_contiguous_) return in_elem(i, j0);
      const char* src = in_elem(i, j0);
      for (int64_t k = 0; k < n; ++k) std::memcpy(gather + k * es_, src + k * in_s1, es_);
      return gather;
    };
    // Statistics over chunks, merged in chunk order in double.
    double m = -std::numeric_limits<double>::infinity(), s = 0, wx = 0;
    for (int64_t c = 0; c < t.num_chunks; ++c) {
      const int64_t j0 = c * t.chunk_cols, n = std::min(t.chunk_cols, cols_ - j0);
      CeStatsArgs args;
      args.x = chunk_in(j0, n);
      args.n = n;
      args.w = w ? w + j0 : nullptr;
      args.want_wx = want_wx_;
      if (in_contiguous_) {  // the chunk read next: this row's next one, else the next row's first
        if (c + 1 < t.num_chunks) {
          args.next = in_elem(i, j0 + n);
          args.next_n = std::min(t.chunk_cols, cols_ - j0 - n);
        } else if (i + 1 < row_end) {
          args.next = in_elem(i + 1, 0);
          args.next_n = std::min(t.chunk_cols, cols_);
        }
      }
      if (fused_ && i > row_begin) {  // the previous row's logProb, written during this row's exp pass
        args.write_in = in_elem(i - 1, 0);
        args.write_out = out_row(i - 1);
        args.write_lse = static_cast<float>(row_lse[i - 1]);
        args.write_stream = t.streaming_stores;
      }
      const CeRowStats st = stats_(dt, args);
      wx += st.sum_wx;
      if (std::isnan(st.max) || std::isnan(st.sum_exp)) {
        m = std::numeric_limits<double>::quiet_NaN();
        s = m;
        continue;
      }
      if (st.max == -std::numeric_limits<float>::infinity()) continue;
      if (st.max > m) {
        s = s * std::exp(m - st.max) + st.sum_exp;
        m = st.max;
      } else {
        s += st.sum_exp * std::exp(st.max - m);
      }
    }
    const double lse = m + std::log(s);  // -inf when every element is -inf (then logProb is NaN, as torch)
    const float lse_f = static_cast<float>(lse);
    for (int64_t c = 0; c < t.num_chunks && !fused_; ++c) {
      const int64_t j0 = c * t.chunk_cols, n = std::min(t.chunk_cols, cols_ - j0);
      if (out_contiguous_) {
        log_prob_(dt, chunk_in(j0, n), out_i + j0 * out_s1, n, lse_f, t.streaming_stores);
      } else {
        log_prob_(dt, chunk_in(j0, n), scatter, n, lse_f, false);
        for (int64_t k = 0; k < n; ++k) std::memcpy(out_i + (j0 + k) * out_s1, scatter + k * es_, es_);
      }
    }
    // Row loss (double): m_i * [(1-ls) * (-w_t * lp_t) + (ls/C) * (-sum_c w_c lp_c)], z-term m_i * z * lse^2.
    const int64_t ti = core::Vec1(a_.target).integer(i);
    double l = 0, zt = 0;
    if (ti != a_.attr.ignore_index) {
      const double wt = a_.weight.data ? core::Vec1(a_.weight).f32(ti) : 1.0;
      const double xt = core::load_float_element(a_.input.dtype, in_elem(i, ti));
      l = (1.0 - ls) * (-wt * (xt - lse));
      if (ls > 0) l += (ls / static_cast<double>(cols_)) * (-(wx - lse * wtotal));
      if (z != 0) zt = z * lse * lse;
    }
    row_loss[i] = l;
    row_z[i] = zt;
    row_lse[i] = lse;
  }

  void finish(const ce::TargetScan& scan, const double* row_loss, const double* row_z, const double* row_lse) {
    const bool zloss = a_.attr.zscale != 0;
    const core::Vec1 loss_out(a_.loss), zloss_out(a_.zloss), lse_out(a_.lse);
    if (a_.lse.data)
      for (int64_t i = 0; i < rows_; ++i) lse_out.set_f32(i, static_cast<float>(row_lse[i]));
    if (red_ == Reduction::kNone) {
      for (int64_t i = 0; i < rows_; ++i) {
        loss_out.set_f32(i, static_cast<float>(row_loss[i] + row_z[i]));
        if (a_.zloss.data) zloss_out.set_f32(i, static_cast<float>(row_z[i]));
      }
      return;
    }
    double sl = 0, sz = 0;
    for (int64_t i = 0; i < rows_; ++i) {
      sl += row_loss[i];
      sz += row_z[i];
    }
    double loss = sl, zl = sz;
    if (red_ == Reduction::kMean) {
      loss = sl / scan.weight_sum;
      zl = sz / static_cast<double>(scan.kept);
      if (zloss) loss += zl;
    } else if (zloss) {
      loss += sz;
    }
    loss_out.set_f32(0, static_cast<float>(loss));
    if (a_.zloss.data) zloss_out.set_f32(0, static_cast<float>(zl));
  }

  LossArgs a_;
  Reduction red_ = Reduction::kMean;
  int64_t rows_ = 0, cols_ = 0, es_ = 4;
  bool in_contiguous_ = true, out_contiguous_ = true, want_wx_ = false, fused_ = false;
  uint64_t bytes_rows_ = 0, bytes_weight_ = 0, bytes_tile_ = 0;
  CrossEntropyLossTiling tiling_;
  uint64_t workspace_bytes_ = 0;
  CeStatsFn stats_ = nullptr;
  CeLogProbFn log_prob_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

CrossEntropyLossOutputSpecs cross_entropy_loss_output_specs(const TensorView& input, const TensorView& target,
                                                            Reduction reduction) {
  ops::validate_inputs(input, target, TensorView{});
  const Reduction r = ops::ce::require_attributes(ops::kOp, ops::ce::attributes_of(CrossEntropyOptions{reduction}));
  const int64_t n = input.shape[0];
  CrossEntropyLossOutputSpecs s;
  const std::vector<int64_t> loss_shape = r == Reduction::kNone ? std::vector<int64_t>{n} : std::vector<int64_t>{};
  s.loss = {input.dtype, loss_shape};
  s.log_prob = {input.dtype, input.shape};
  s.zloss = {input.dtype, loss_shape};
  s.lse_for_zloss = {input.dtype, {n}};
  return s;
}

void cross_entropy_loss(const TensorView& input, const TensorView& target, const TensorView& weight,
                        const CrossEntropyOptions& o, const TensorView& loss, const TensorView& log_prob,
                        const TensorView& zloss, const TensorView& lse_for_zloss) {
  ops::LossArgs a{input, target, weight, loss, log_prob, zloss, lse_for_zloss, ops::ce::attributes_of(o)};
  ops::CrossEntropyLossLaunch launch(a);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnCrossEntropyLossGetWorkspaceSize(
    const aclTensor* input, const aclTensor* target, const aclTensor* weightOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, bool returnZloss,
    const aclTensor* lossOut, const aclTensor* logProbOut, const aclTensor* zlossOut,
    const aclTensor* lseForZlossOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const ops::ce::Attributes attr =
      ops::ce::attributes_of(reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss);
  // z-loss off and not requested: zlossOut / lseForZlossOut are ignored but for their dtype.
  const bool zloss_used = lseSquareScaleForZloss != 0 || returnZloss;
  std::vector<std::pair<const char*, DType>> unused_outputs;
  if (!zloss_used) {
    if (zlossOut) unused_outputs.emplace_back("zlossOut", static_cast<DType>(zlossOut->dtype));
    if (lseForZlossOut) unused_outputs.emplace_back("lseForZlossOut", static_cast<DType>(lseForZlossOut->dtype));
  }
  const core::TensorParams params{{"input", "target", "weightOptional"},
                                  {"lossOut", "logProbOut", "zlossOut", "lseForZlossOut"}};
  return core::create_executor(ops::kOp, params, workspaceSize, executor, [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "input", input);
    core::require_not_null(ops::kOp, "target", target);
    core::require_not_null(ops::kOp, "lossOut", lossOut);
    core::require_not_null(ops::kOp, "logProbOut", logProbOut);
    if (returnZloss) {
      core::require_not_null(ops::kOp, "zlossOut (returnZloss is true)", zlossOut);
      core::require_not_null(ops::kOp, "lseForZlossOut (returnZloss is true)", lseForZlossOut);
    }
    ops::LossArgs a;
    a.input = t.view("input", input);
    a.target = t.view("target", target);
    a.weight = t.optional_view("weightOptional", weightOptional);
    a.loss = t.view("lossOut", lossOut);
    a.log_prob = t.view("logProbOut", logProbOut);
    if (zloss_used) {
      a.zloss = t.optional_view("zlossOut", zlossOut);
      a.lse = t.optional_view("lseForZlossOut", lseForZlossOut);
    }
    a.attr = attr;
    a.unused_outputs = unused_outputs;
    return std::make_unique<ops::CrossEntropyLossLaunch>(a);
  });
}

extern "C" aclnnStatus aclnnCrossEntropyLoss(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
