// aclnnBinaryCrossEntropyWithLogits: launch, native C++ API and C ABI; the validation (README.md) is
// the family's, bce_checks.h.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "aclnnop/aclnn_binary_cross_entropy_with_logits.h"
#include "core/dtype.h"
#include "core/elementwise.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/reduction.h"
#include "core/tensor.h"
#include "core/vec1.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_checks.h"
#include "ops/loss/binary_cross_entropy_with_logits/bce_operand.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_kernel.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_tiling.h"
#include "tilegrad/binary_cross_entropy_with_logits.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnBinaryCrossEntropyWithLogits";

// A dense view with self's shape whose strides follow self's memory order (largest |stride| first):
// in mean / sum it stands in for the output in the elementwise layout, so the elements are walked in
// self's memory order. Never read or written; its data is self's (only compared, offset).
TensorView walk_order_of(const TensorView& self) {
  const int rank = self.rank();
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return std::llabs(self.strides[a]) > std::llabs(self.strides[b]); });
  TensorView v(self.data, DType::kFloat32, self.shape, std::vector<int64_t>(rank, 0));
  int64_t stride = 1;
  for (int k = rank - 1; k >= 0; --k) {
    v.strides[order[k]] = stride;
    stride *= self.shape[order[k]];
  }
  return v;
}

// v rounded once, to nearest even, to out's dtype, stored in out's one element. fp16 / bf16 go
// through a float rounded to odd (truncated, lowest bit set when inexact): with 13+ more bits than
// the target it then rounds to nearest even exactly as v itself would (no double rounding).
void store_rounded_once(const TensorView& out, double v) {
  float f = static_cast<float>(v);
  if (out.dtype != DType::kFloat32 && !std::isnan(v) && static_cast<double>(f) != v) {
    if (std::isinf(f)) f = std::copysign(FLT_MAX, f);                           // rounded up past the range
    else if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);  // truncate
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits |= 1u;
    std::memcpy(&f, &bits, 4);
  }
  core::Vec1(out).set_f32(0, f);
}

class BceForwardLaunch final : public core::Launch {
 public:
  BceForwardLaunch(const TensorView& x, const TensorView& t, const TensorView* w, const TensorView* pw,
                   const core::ReductionArg& reduction, const TensorView& out)
      : out_(out), w_(w ? *w : TensorView{}), pw_(pw ? *pw : TensorView{}) {
    bce_validate(kOp, {nullptr, x, t, w, pw, &out}, &reduction, BceOutShape::kByReduction);
    const int64_t numel = x.numel();
    const bool reduce = reduction.value != Reduction::kNone;
    // Operands broadcast from one element are read once per launch and folded into constants.
    variant_.reduce = reduce;
    variant_.out = out.dtype;
    weight_scalar_ = bce_operand(w, numel) == BceOperand::kScalar;
    variant_.weight_vector = bce_operand(w, numel) == BceOperand::kVector;
    variant_.pos_weight = bce_operand(pw, numel);

    TensorView walk;
    const TensorView* ops[core::kMaxOperands];
    const int nops = layout_operands(x, t, w, pw, out, walk, ops);
    int64_t bytes = dtype_size(x.dtype) + dtype_size(t.dtype) + (reduce ? 0 : dtype_size(out.dtype));
    for (int k = 3; k < nops; ++k)
      if (ops[k]->numel() == numel) bytes += dtype_size(ops[k]->dtype);  // broadcast operands stay in cache
    variant_.inputs_dtype = x.dtype;
    for (int k = 1; k < nops; ++k) {
      params_.inputs[k - 1] = ops[k]->dtype;
      if (ops[k]->dtype != x.dtype) variant_.inputs_dtype = DType::kUndefined;
    }
    layout_ = core::make_elementwise_layout(ops, nops);
    tiling_ = bce_forward_tiling(numel, bytes, reduce || core::inner_is_contiguous(layout_),
                                 static_cast<int64_t>(reduction.value), core::Platform::current());
    kernel_ = bce_forward_kernel(tiling_.isa, variant_);
    trace_.record(kOp, {{"self", &x}, {"target", &t}, {"weightOptional", w}, {"posWeightOptional", pw}, {"out", &out}},
                  tiling_);
  }

  uint64_t workspace_bytes() const override { return tiling_.workspace_bytes; }

  void bind(const core::Operands& a) override {
    const TensorView &x = a["self"], &t = a["target"], &out = a["out"];
    const TensorView *w = bce_optional(a["weightOptional"]), *pw = bce_optional(a["posWeightOptional"]);
    bce_check_overlaps(kOp, {nullptr, x, t, w, pw, &out});
    TensorView walk;
    const TensorView* ops[core::kMaxOperands];
    layout_operands(x, t, w, pw, out, walk, ops);
    core::bind_elementwise_layout(layout_, ops);
    out_ = out;
    w_ = w ? *w : TensorView{};
    pw_ = pw ? *pw : TensorView{};
  }

  void run(void* workspace) override {
    // One-element operands are read at launch time (the C ABI may fill the tensors after phase 1).
    BceForwardParams p = params_;
    if (weight_scalar_) p.factor = bce_read_one(w_);
    if (variant_.pos_weight == BceOperand::kScalar) p.pos_weight = bce_read_one(pw_);
    if (tiling_.reduction == 0) {
      if (tiling_.tiles.num_tiles == 0) return;
      core::run_elementwise(layout_, tiling_.tiles,
                            [&](char* const* ptrs, int64_t n, bool stream) { kernel_(p, ptrs, n, stream); });
      return;
    }
    double* partial = static_cast<double*>(workspace);
    if (tiling_.tiles.num_tiles > 0) sum_blocks(p, partial);
    double total = 0.0;
    for (int64_t b = 0; b < tiling_.num_blocks; ++b) total += partial[b];  // block order: thread-count free
    const int64_t numel = tiling_.tiles.numel;
    // mean of nothing: 0 / 0 = NaN (PyTorch and the vendor)
    if (tiling_.reduction == 1) total = numel > 0 ? total / static_cast<double>(numel) : std::nan("");
    store_rounded_once(out_, total);
  }

 private:
  // The elementwise layout's operands into ops (returns how many): out, or in mean / sum self's walk
  // order (into `walk`); self, target; then weight and posWeight where read per element.
  int layout_operands(const TensorView& x, const TensorView& t, const TensorView* w, const TensorView* pw,
                      const TensorView& out, TensorView& walk, const TensorView** ops) const {
    if (variant_.reduce) walk = walk_order_of(x);
    int n = 0;
    for (const TensorView* v : {variant_.reduce ? &walk : &out, &x, &t}) ops[n++] = v;
    if (variant_.weight_vector) ops[n++] = w;
    if (variant_.pos_weight == BceOperand::kVector) ops[n++] = pw;
    return n;
  }

  // partial[b] = the sum of block b's losses, its spans in order; tiles are whole runs of blocks.
  void sum_blocks(const BceForwardParams& p, double* partial) const {
    const core::ElementwiseTiling& t = tiling_.tiles;
    const int64_t block = tiling_.block_elems;
    core::parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
      const int64_t first = tile * t.tile_elems / block;
      const int64_t last = std::min(tiling_.num_blocks, (tile + 1) * t.tile_elems / block);
      for (int64_t b = first; b < last; ++b) {
        double s = 0.0;
        core::for_each_span(layout_, b * block, std::min(t.numel, (b + 1) * block),
                            [&](char* const* ptrs, int64_t n, bool) { s += kernel_(p, ptrs, n, false); });
        partial[b] = s;
      }
    });
  }

  TensorView out_, w_, pw_;  // out for the reduced value; w_ / pw_ for the one-element reads
  bool weight_scalar_ = false;
  BceForwardVariant variant_;
  BceForwardParams params_;
  core::ElementwiseLayout layout_;
  BceForwardTiling tiling_;
  BceForwardSpanFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec binary_cross_entropy_with_logits_output_spec(const TensorView& self, const TensorView& target,
                                                        const TensorView& weight, const TensorView& pos_weight,
                                                        Reduction reduction) {
  const core::ReductionArg r = core::reduction_arg(reduction);
  ops::bce_validate(ops::kOp, {nullptr, self, target, ops::bce_optional(weight), ops::bce_optional(pos_weight), nullptr},
                    &r, ops::BceOutShape::kByReduction);
  if (reduction == Reduction::kNone) return {target.dtype, self.shape};
  return {target.dtype, {}};
}

void binary_cross_entropy_with_logits(const TensorView& self, const TensorView& target, const TensorView& weight,
                                      const TensorView& pos_weight, Reduction reduction, const TensorView& out) {
  ops::BceForwardLaunch launch(self, target, ops::bce_optional(weight), ops::bce_optional(pos_weight),
                               core::reduction_arg(reduction), out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(
    const aclTensor* self, const aclTensor* target, const aclTensor* weightOptional, const aclTensor* posWeightOptional,
    int64_t reduction, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(
      ops::kOp, {{"self", "target", "weightOptional", "posWeightOptional"}, {"out"}}, workspaceSize, executor,
      [&](core::ExecutorTensors& tensors) {
        const core::ReductionArg r = core::reduction_from_code(reduction);
        const ops::BceAclViews v = ops::bce_views_of(
            ops::kOp, {nullptr, self, target, weightOptional, posWeightOptional, out}, /*with_grad_output=*/false,
            tensors);
        return std::make_unique<ops::BceForwardLaunch>(v.self, v.target, v.weight_or_null(), v.pos_weight_or_null(),
                                                       r, v.out);
      });
}

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogits(void* workspace, uint64_t workspaceSize,
                                                         aclOpExecutor* executor, const aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
