// aclnnRotaryPositionEmbedding: validation (README.md, "Rules"), launch, native C++ API and C ABI.
#include <cstring>
#include <memory>

#include "aclnnop/aclnn_rotary_position_embedding.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/posembedding/rotary_position_embedding/rope_checks.h"
#include "ops/posembedding/rotary_position_embedding/rope_rows.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_kernel.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_tiling.h"
#include "tilegrad/rotary_position_embedding.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnRotaryPositionEmbedding";

// The rules that depend on addresses: out may be x itself (in place), never share memory with cos / sin.
void check_overlaps(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out) {
  core::require_no_partial_overlap(kOp, "out", out, "x", x, true);
  core::require_no_partial_overlap(kOp, "out", out, "cos", cos, false);
  core::require_no_partial_overlap(kOp, "out", out, "sin", sin, false);
}

// In the vendor's order: dtypes (161002), then ranks, mode and shapes (561002), then overlaps
// (161002). out may be null (the output spec). An empty x skips the cos / sin shape rules (the
// vendor's document: "not bound by the shape constraints"); the shape returned then carries x's
// dims and the mode only.
RopeShape validate(const TensorView& x, const TensorView& cos, const TensorView& sin, int64_t mode,
                   const TensorView* out) {
  core::require_well_formed(kOp, "x", x);
  core::require_well_formed(kOp, "cos", cos);
  core::require_well_formed(kOp, "sin", sin);
  if (out) core::require_well_formed(kOp, "out", *out);
  require_rope_dtypes(kOp, "x", x, cos, sin);
  if (out) require_rope_output_dtype(kOp, "out", *out, "x", x);
  require_rope_rank(kOp, "x", x);
  require_rope_rank(kOp, "cos", cos);
  require_rope_rank(kOp, "sin", sin);
  if (out) require_rope_rank(kOp, "out", *out);
  const RopeMode m = rope_mode(kOp, mode);
  RopeShape s;
  if (x.numel() == 0) {
    s.mode = m;
    for (int k = 0; k < 3; ++k) s.dims[k] = s.cos_dims[k] = x.shape[k];
    s.d = x.shape[3];
  } else {
    s = rope_shape(kOp, "x", x, cos, sin, m);
  }
  if (!out) return s;
  require_rope_output_shape(kOp, "out", *out, "x", x);
  core::require_no_self_overlap(kOp, "out", *out);
  check_overlaps(x, cos, sin, *out);
  return s;
}

class RopeForwardLaunch final : public core::Launch {
 public:
  RopeForwardLaunch(const TensorView& x, const TensorView& cos, const TensorView& sin, int64_t mode,
                    const TensorView& out)
      : shape_(validate(x, cos, sin, mode, &out)) {
    tiling_ = rotary_position_embedding_tiling(shape_, dtype_size(x.dtype), rope_rows_aligned(out),
                                               core::Platform::current());
    set_addresses(x, cos, sin, out);
    trace_.record(kOp, {{"x", &x}, {"cos", &cos}, {"sin", &sin}, {"out", &out}}, tiling_);
    trace_.field("direct_rows", direct_);
  }

  void bind(const core::Operands& t) override {
    const TensorView &x = t["x"], &cos = t["cos"], &sin = t["sin"], &out = t["out"];
    check_overlaps(x, cos, sin, out);
    set_addresses(x, cos, sin, out);
  }

  void run(void*) override {
    const RopeRowTiles& t = tiling_.tiles;
    core::parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
      if (direct_) return kernel_(args_, t.begin(tile), t.end(tile));
      for (int64_t r = t.begin(tile); r < t.end(tile); ++r) staged_row(r);
    });
  }

 private:
  // The operands and what their addresses decide: rows go through stack copies when x is out itself
  // in mode 3 (a row's later pairs would read elements its earlier stores replaced) or a last dim is
  // strided; non-temporal stores only as planned and where out's rows are 64-byte aligned.
  void set_addresses(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out) {
    x_ = x;
    cos_ = cos;
    sin_ = sin;
    out_ = out;
    const RopeShape& s = shape_;
    const bool x_hazard = s.mode == RopeMode::kInterleaveHalf && out.data == x.data;
    direct_ = x.numel() == 0 || (!x_hazard && rope_inner_contiguous(x) && rope_inner_contiguous(cos) &&
                                 rope_inner_contiguous(sin) && rope_inner_contiguous(out));
    if (x.numel() == 0) return;
    args_ = {{s.dims[0], s.dims[1], s.dims[2]}, s.d, rope_operand(x), rope_operand(cos), rope_operand(sin),
             rope_operand(out)};
    const bool streaming = tiling_.streaming_stores && rope_rows_aligned(out);
    kernel_ = rope_forward_kernel(tiling_.isa, x.dtype, s.mode, streaming && direct_);
    row_kernel_ = rope_forward_kernel(tiling_.isa, x.dtype, s.mode, false);
  }

  // One row through contiguous stack copies (strided last dims, in-place mode 3).
  void staged_row(int64_t r) {
    RopeRowWalker w(args_.dims, r);
    RopeStage stage(args_.d, dtype_size(x_.dtype));
    RopeForwardArgs one = args_;
    for (int64_t& d : one.dims) d = 1;
    one.x = stage.in(0, x_, args_.x.row(w.idx));
    one.cos = stage.in(1, cos_, args_.cos.row(w.idx));
    one.sin = stage.in(2, sin_, args_.sin.row(w.idx));
    one.y = stage.out(3);
    row_kernel_(one, 0, 1);
    stage.flush(3, out_, args_.y.row(w.idx));
  }

  RopeShape shape_;
  TensorView x_, cos_, sin_, out_;
  RotaryPositionEmbeddingTiling tiling_;
  RopeForwardArgs args_;
  bool direct_ = true;
  RopeForwardFn kernel_ = nullptr, row_kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec rotary_position_embedding_output_spec(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                                 int64_t mode) {
  ops::validate(x, cos, sin, mode, nullptr);
  return {x.dtype, x.shape};
}

void rotary_position_embedding(const TensorView& x, const TensorView& cos, const TensorView& sin, int64_t mode,
                               const TensorView& out) {
  ops::RopeForwardLaunch launch(x, cos, sin, mode, out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor* x, const aclTensor* cos,
                                                                   const aclTensor* sin, int64_t mode, aclTensor* out,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"x", "cos", "sin"}, {"out"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "x", x);
    core::require_not_null(ops::kOp, "cos", cos);
    core::require_not_null(ops::kOp, "sin", sin);
    core::require_not_null(ops::kOp, "out", out);
    return std::make_unique<ops::RopeForwardLaunch>(t.view("x", x), t.view("cos", cos), t.view("sin", sin), mode,
                                                    t.view("out", out));
  });
}

extern "C" aclnnStatus aclnnRotaryPositionEmbedding(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                   aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
