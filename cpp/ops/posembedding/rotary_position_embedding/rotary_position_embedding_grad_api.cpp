// aclnnRotaryPositionEmbeddingGrad: validation (README.md, "Rules"), launch, native C++ API and C ABI.
#include <algorithm>
#include <cstring>
#include <memory>

#include "aclnnop/aclnn_rotary_position_embedding_grad.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/posembedding/rotary_position_embedding/rope_checks.h"
#include "ops/posembedding/rotary_position_embedding/rope_rows.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_kernel.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_tiling.h"
#include "tilegrad/rotary_position_embedding.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnRotaryPositionEmbeddingGrad";

// The tensors of one call; x, dcos and dsin may be absent (TensorView{}).
struct GradArgs {
  const TensorView &dy, &cos, &sin, &x;
  int64_t mode;
  const TensorView &dx, &dcos, &dsin;
};

// Overlaps: dxOut may be dy itself (in place); the outputs share no other memory. with_self: also each
// output's own elements (strides only; the rest depends on addresses and is checked again when the
// launch is bound to new ones).
void check_overlaps(const GradArgs& a, bool with_self) {
  const std::pair<const char*, const TensorView*> all[] = {{"dy", &a.dy},          {"cos", &a.cos},
                                                           {"sin", &a.sin},        {"xOptional", &a.x},
                                                           {"dxOut", &a.dx},       {"dcosOut", &a.dcos},
                                                           {"dsinOut", &a.dsin}};
  if (with_self) core::require_no_self_overlap(kOp, "dxOut", a.dx);
  core::require_no_partial_overlap(kOp, "dxOut", a.dx, "dy", a.dy, true);
  core::require_no_partial_overlap(kOp, "dxOut", a.dx, "cos", a.cos, false);
  core::require_no_partial_overlap(kOp, "dxOut", a.dx, "sin", a.sin, false);
  if (!core::present(a.x)) return;
  core::require_no_partial_overlap(kOp, "dxOut", a.dx, "xOptional", a.x, false);
  for (const auto& [name, t] : {std::pair{"dcosOut", &a.dcos}, std::pair{"dsinOut", &a.dsin}}) {
    if (with_self) core::require_no_self_overlap(kOp, name, *t);
    for (const auto& [other, u] : all)
      if (u != t && core::present(*u)) core::require_no_partial_overlap(kOp, name, *t, other, *u, false);
  }
}

// In the vendor's order: dtypes (161002), then ranks, mode and shapes (561002), then overlaps
// (161002). dcos and dsin are required when x is given (161001, as a null aclTensor).
RopeShape validate(const GradArgs& a) {
  const bool with_x = core::present(a.x);
  if (!core::present(a.dx)) core::fail(Status::kParamNullptr, kOp, ": dxOut must be given");
  if (with_x) {
    if (!core::present(a.dcos)) core::fail(Status::kParamNullptr, kOp, ": dcosOut must be given when xOptional is");
    if (!core::present(a.dsin)) core::fail(Status::kParamNullptr, kOp, ": dsinOut must be given when xOptional is");
  }
  const std::pair<const char*, const TensorView*> all[] = {{"dy", &a.dy},          {"cos", &a.cos},
                                                           {"sin", &a.sin},        {"xOptional", &a.x},
                                                           {"dxOut", &a.dx},       {"dcosOut", &a.dcos},
                                                           {"dsinOut", &a.dsin}};
  for (const auto& [name, t] : all)
    if (core::present(*t)) core::require_well_formed(kOp, name, *t);
  require_rope_dtypes(kOp, "dy", a.dy, a.cos, a.sin);
  for (const auto& [name, t] : all)
    if (core::present(*t)) require_rope_output_dtype(kOp, name, *t, "dy", a.dy);
  for (const auto& [name, t] : all)
    if (core::present(*t)) require_rope_rank(kOp, name, *t);
  const RopeShape s = rope_shape(kOp, "dy", a.dy, a.cos, a.sin, rope_mode(kOp, a.mode));
  if (with_x) require_rope_output_shape(kOp, "xOptional", a.x, "dy", a.dy);
  require_rope_output_shape(kOp, "dxOut", a.dx, "dy", a.dy);
  if (core::present(a.dcos)) require_rope_output_shape(kOp, "dcosOut", a.dcos, "cos", a.cos);
  if (core::present(a.dsin)) require_rope_output_shape(kOp, "dsinOut", a.dsin, "cos", a.cos);
  check_overlaps(a, true);
  return s;
}

class RopeGradLaunch final : public core::Launch {
 public:
  explicit RopeGradLaunch(const GradArgs& a) : mode_(a.mode) {
    const RopeShape s = validate(a);
    es_ = dtype_size(a.dy.dtype);
    tiling_ = rotary_position_embedding_grad_tiling(s, es_, core::present(a.x), rope_rows_aligned(a.dx),
                                                    core::Platform::current());
    set_addresses(a);
    kernels_ = rope_grad_kernels(tiling_.isa, a.dy.dtype, s.mode);
    trace_.record(kOp,
                  {{"dy", &a.dy}, {"cos", &a.cos}, {"sin", &a.sin}, {"xOptional", &a.x}, {"dxOut", &a.dx},
                   {"dcosOut", &a.dcos}, {"dsinOut", &a.dsin}},
                  tiling_);
    trace_.field("direct_rows", direct_);
  }

  uint64_t workspace_bytes() const override { return tiling_.workspace_bytes; }

  void bind(const core::Operands& t) override {
    const GradArgs a{t["dy"], t["cos"], t["sin"], t["xOptional"], mode_, t["dxOut"], t["dcosOut"], t["dsinOut"]};
    check_overlaps(a, false);
    set_addresses(a);
  }

  void run(void* workspace) override {
    const RotaryPositionEmbeddingGradTiling& t = tiling_;
    if (!t.with_x) {
      const RopeGradDxFn dx = streaming_ && direct_ ? kernels_.dx_stream : kernels_.dx;
      core::parallel_for(t.tiles.num_tiles, t.tiles.num_tiles, [&](int64_t tile) {
        if (direct_) return dx(args_, t.tiles.begin(tile), t.tiles.end(tile));
        for (int64_t r = t.tiles.begin(tile); r < t.tiles.end(tile); ++r) {
          RopeRowWalker w(args_.dims, r);
          staged_row(w.idx, nullptr);
        }
      });
      return;
    }
    if (t.group_rows == 0) return zero_sums();
    core::parallel_for(t.tiles.num_tiles, t.tiles.num_tiles, [&](int64_t tile) {
      for (int64_t u = t.tiles.begin(tile); u < t.tiles.end(tile); ++u) run_unit(u, workspace);
    });
    if (!t.second_pass()) return;
    core::parallel_for(t.final_tiles.num_tiles, t.final_tiles.num_tiles, [&](int64_t tile) {
      alignas(64) float acc[2 * kRopeMaxD];
      for (int64_t g = t.final_tiles.begin(tile); g < t.final_tiles.end(tile); ++g) {
        core::sum_row_block_partials(t.blocks, group_partials(workspace, g), acc, 1);
        store_sums(g, acc);
      }
    });
  }

 private:
  // The operands and what their addresses decide: rows go through copies when dx is dy itself in
  // mode 3 (dy planar, dx interleaved: a row's later pairs would read elements its earlier stores
  // replaced) or a last dim is strided; non-temporal stores only as planned and where dx's rows are
  // 64-byte aligned.
  void set_addresses(const GradArgs& a) {
    dy_ = a.dy;
    cos_ = a.cos;
    sin_ = a.sin;
    x_ = a.x;
    dx_ = a.dx;
    dcos_ = a.dcos;
    dsin_ = a.dsin;
    const RopeShape& s = tiling_.shape;
    const bool with_x = core::present(a.x);
    const bool hazard = s.mode == RopeMode::kInterleaveHalf && a.dx.data == a.dy.data;
    direct_ = !hazard && rope_inner_contiguous(a.dy) && rope_inner_contiguous(a.cos) && rope_inner_contiguous(a.sin) &&
              rope_inner_contiguous(a.dx) && (!with_x || rope_inner_contiguous(a.x));
    direct_out_ = !with_x || (rope_inner_contiguous(a.dcos) && rope_inner_contiguous(a.dsin));
    streaming_ = tiling_.streaming_stores && rope_rows_aligned(a.dx);
    args_.d = s.d;
    for (int k = 0; k < 3; ++k) args_.dims[k] = s.dims[k];
    if (a.dy.numel() > 0) {
      args_.dy = rope_operand(a.dy);
      args_.cos = rope_operand(a.cos);
      args_.sin = rope_operand(a.sin);
      args_.dx = rope_operand(a.dx);
      if (with_x) args_.x = rope_operand(a.x);
    }
    if (with_x) {
      dcos_op_ = rope_operand(a.dcos);
      dsin_op_ = rope_operand(a.dsin);
    }
  }

  // Unit u = (group, block): dx of the block's rows and their fp32 partial of dcos / dsin.
  void run_unit(int64_t u, void* workspace) {
    const RotaryPositionEmbeddingGradTiling& t = tiling_;
    const int64_t nb = t.blocks.num_blocks, g = u / nb, b = u % nb;
    alignas(64) float local[2 * kRopeMaxD];
    float* acc = nb == 1 ? local : t.blocks.partial(group_partials(workspace, g), b);
    std::fill(acc, acc + 2 * args_.d, 0.0f);
    int64_t gidx[3];
    group_index(g, gidx);
    for (int64_t k = t.blocks.begin(b); k < t.blocks.end(b); ++k) {
      int64_t idx[3];
      row_index(gidx, k, idx);
      if (direct_)
        kernels_.row(args_.dy.row(idx), args_.cos.row(idx), args_.sin.row(idx), args_.x.row(idx), args_.dx.row(idx),
                     args_.d, acc);
      else
        staged_row(idx, acc);
    }
    if (nb == 1) store_sums(g, acc);
  }

  // Group g's multi-index over cos's leading dims.
  void group_index(int64_t g, int64_t* gidx) const {
    const RopeShape& s = tiling_.shape;
    for (int k = 2; k >= 0; --k) {
      gidx[k] = g % s.cos_dims[k];
      g /= s.cos_dims[k];
    }
  }

  // The k-th dy row (row-major over the broadcast dims) of the group at gidx.
  void row_index(const int64_t* gidx, int64_t k, int64_t* idx) const {
    const RopeShape& s = tiling_.shape;
    for (int d = 2; d >= 0; --d) {
      if (s.broadcast(d)) {
        idx[d] = k % s.dims[d];
        k /= s.dims[d];
      } else {
        idx[d] = gidx[d];
      }
    }
  }

  void* group_partials(void* workspace, int64_t g) const {
    return static_cast<char*>(workspace) + g * tiling_.blocks.workspace_bytes();
  }

  // acc (fp32 dcos, dsin of group g) rounded into the outputs.
  void store_sums(int64_t g, const float* acc) {
    int64_t gidx[3];
    group_index(g, gidx);
    char* c = dcos_op_.row(gidx);
    char* s = dsin_op_.row(gidx);
    if (direct_out_) return kernels_.store(acc, args_.d, c, s);
    RopeStage stage(args_.d, es_);
    kernels_.store(acc, args_.d, stage.out(0).base, stage.out(1).base);
    stage.flush(0, dcos_, c);
    stage.flush(1, dsin_, s);
  }

  // Sums over no rows (dy empty, cos not): zeros.
  void zero_sums() {
    alignas(64) float zeros[2 * kRopeMaxD] = {};
    for (int64_t g = 0; g < tiling_.groups; ++g) store_sums(g, zeros);
  }

  // One row through contiguous stack copies; acc null: dx only.
  void staged_row(const int64_t* idx, float* acc) {
    RopeStage stage(args_.d, es_);
    const char* gy = stage.in(0, dy_, args_.dy.row(idx)).base;
    const char* c = stage.in(1, cos_, args_.cos.row(idx)).base;
    const char* s = stage.in(2, sin_, args_.sin.row(idx)).base;
    char* dx = stage.out(4).base;
    if (acc) {
      kernels_.row(gy, c, s, stage.in(3, x_, args_.x.row(idx)).base, dx, args_.d, acc);
    } else {
      RopeGradArgs one;
      one.d = args_.d;
      one.dims[0] = one.dims[1] = one.dims[2] = 1;
      one.dy.base = const_cast<char*>(gy);
      one.cos.base = const_cast<char*>(c);
      one.sin.base = const_cast<char*>(s);
      one.dx.base = dx;
      kernels_.dx(one, 0, 1);
    }
    stage.flush(4, dx_, args_.dx.row(idx));
  }

  int64_t mode_;
  TensorView dy_, cos_, sin_, x_, dx_, dcos_, dsin_;
  int64_t es_ = 0;
  RotaryPositionEmbeddingGradTiling tiling_;
  RopeGradArgs args_;
  RopeOperand dcos_op_, dsin_op_;
  bool direct_ = true, direct_out_ = true, streaming_ = false;
  RopeGradKernels kernels_;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void rotary_position_embedding_grad(const TensorView& dy, const TensorView& cos, const TensorView& sin,
                                    const TensorView& x, int64_t mode, const TensorView& dx, const TensorView& dcos,
                                    const TensorView& dsin) {
  ops::RopeGradLaunch launch({dy, cos, sin, x, mode, dx, dcos, dsin});
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* cos, const aclTensor* sin, const aclTensor* xOptional, int64_t mode,
    const aclTensor* dxOut, const aclTensor* dcosOut, const aclTensor* dsinOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return core::create_executor(
      ops::kOp, {{"dy", "cos", "sin", "xOptional"}, {"dxOut", "dcosOut", "dsinOut"}}, workspaceSize, executor,
      [&](core::ExecutorTensors& t) {
        // Every output is required (the vendor's document), even when xOptional is null and dcosOut /
        // dsinOut are then left untouched.
        core::require_not_null(ops::kOp, "dy", dy);
        core::require_not_null(ops::kOp, "cos", cos);
        core::require_not_null(ops::kOp, "sin", sin);
        core::require_not_null(ops::kOp, "dxOut", dxOut);
        core::require_not_null(ops::kOp, "dcosOut", dcosOut);
        core::require_not_null(ops::kOp, "dsinOut", dsinOut);
        const TensorView vdy = t.view("dy", dy);
        const TensorView vcos = t.view("cos", cos);
        const TensorView vsin = t.view("sin", sin);
        const TensorView vx = t.optional_view("xOptional", xOptional);
        const TensorView vdx = t.view("dxOut", dxOut);
        const TensorView vdcos = t.view("dcosOut", dcosOut);
        const TensorView vdsin = t.view("dsinOut", dsinOut);
        return std::make_unique<ops::RopeGradLaunch>(ops::GradArgs{vdy, vcos, vsin, vx, mode, vdx, vdcos, vdsin});
      });
}

extern "C" aclnnStatus aclnnRotaryPositionEmbeddingGrad(void* workspace, uint64_t workspaceSize,
                                                       aclOpExecutor* executor, aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
