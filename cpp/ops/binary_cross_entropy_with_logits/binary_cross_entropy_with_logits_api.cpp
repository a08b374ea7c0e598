// aclnnBinaryCrossEntropyWithLogits: validation (README.md in this folder), launch, native C++ API
// and C ABI.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "aclnnop/aclnn_binary_cross_entropy_with_logits.h"
#include "core/acl_tensor.h"
#include "core/checked_size.h"
#include "core/dtype.h"
#include "core/elementwise.h"
#include "core/elementwise_run.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/reduction.h"
#include "core/tensor.h"
#include "core/vec1.h"
#include "ops/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_kernel.h"
#include "ops/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_tiling.h"
#include "tilegrad/binary_cross_entropy_with_logits.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnBinaryCrossEntropyWithLogits";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// The tensors of one call; weight / pos_weight / out are null when absent (out: output-spec query).
struct BceForwardArgs {
  const TensorView& self;
  const TensorView& target;
  const TensorView* weight;
  const TensorView* pos_weight;
  const TensorView* out;
};

void require_broadcasts_to_self(const char* arg, const TensorView& t, const TensorView& self) {
  core::check(core::broadcasts_to(t.shape, self.shape), kOp, ": ", arg, " shape ", shape_str(t.shape),
              " does not broadcast to self shape ", shape_str(self.shape));
}

// out's shape: self's for none; one element, shape [] or [1], for mean and sum (the vendor documents
// [1]; PyTorch returns a 0-d tensor). Unknown while the reduction is invalid (reported after shapes).
void require_out_shape(const TensorView& out, const TensorView& self, const core::ReductionArg& reduction) {
  if (!reduction.valid()) return;
  if (reduction.value == Reduction::kNone) return core::require_shape(kOp, "out", out, self.shape, "self shape");
  const bool scalar = out.rank() == 0 || (out.rank() == 1 && out.shape[0] == 1);
  core::check(scalar, kOp, ": out shape must be [] or [1] for reduction ", core::reduction_name(reduction.value),
              ", got ", shape_str(out.shape));
}

// Order of SEMANTICS section 0: dtypes -> ranks -> shapes -> reduction -> overlaps (nulls are the C
// ABI's, before this). out is skipped when a.out is null.
void validate(const BceForwardArgs& a, const core::ReductionArg& reduction) {
  struct Named {
    const char* name;
    const TensorView* t;
  };
  const Named inputs[] = {{"self", &a.self}, {"target", &a.target}, {"weightOptional", a.weight},
                          {"posWeightOptional", a.pos_weight}};
  for (const Named& n : inputs)
    if (n.t) core::require_well_formed(kOp, n.name, *n.t);
  if (a.out) core::require_well_formed(kOp, "out", *a.out);

  for (const Named& n : inputs)
    if (n.t) core::require_dtype(kOp, n.name, *n.t, kFloatTypes);
  if (a.out) {
    core::require_dtype(kOp, "out", *a.out, kFloatTypes);
    core::check(a.out->dtype == a.target.dtype, kOp, ": out dtype ", dtype_name(a.out->dtype), " != target dtype ",
                dtype_name(a.target.dtype), " (out must have target's dtype)");
  }

  for (const Named& n : inputs)
    if (n.t) core::require_rank_at_most(kOp, n.name, *n.t);
  if (a.out) core::require_rank_at_most(kOp, "out", *a.out);

  core::require_shape(kOp, "target", a.target, a.self.shape, "self shape");
  if (a.out) require_out_shape(*a.out, a.self, reduction);
  if (a.weight) require_broadcasts_to_self("weightOptional", *a.weight, a.self);
  if (a.pos_weight) require_broadcasts_to_self("posWeightOptional", *a.pos_weight, a.self);

  core::require_valid(kOp, reduction);

  if (a.out) {
    core::require_no_self_overlap(kOp, "out", *a.out);
    for (const Named& n : inputs)
      if (n.t) core::require_no_partial_overlap(kOp, "out", *a.out, n.name, *n.t, true);
  }
}

// The single element of a one-element fp32/fp16/bf16 view, widened to fp32.
float read_one(const TensorView& t) { return static_cast<float>(core::load_float_element(t.dtype, t.data)); }

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
    validate({x, t, w, pw, &out}, reduction);
    const int64_t numel = x.numel();
    const bool reduce = reduction.value != Reduction::kNone;
    // Operands broadcast from one element are read once per launch and folded into constants.
    const auto one_element = [&](const TensorView* v) { return v && v->numel() == 1 && numel > 1; };
    variant_.reduce = reduce;
    variant_.out = out.dtype;
    variant_.weight_vector = w && !one_element(w);
    weight_scalar_ = one_element(w);
    variant_.pos_weight = !pw ? BceForwardPosWeight::kAbsent
                              : one_element(pw) ? BceForwardPosWeight::kScalar : BceForwardPosWeight::kVector;

    const TensorView walk = reduce ? walk_order_of(x) : TensorView{};
    const TensorView* ops[core::kMaxOperands] = {reduce ? &walk : &out, &x, &t};
    int nops = 3;
    int64_t bytes = dtype_size(x.dtype) + dtype_size(t.dtype) + (reduce ? 0 : dtype_size(out.dtype));
    auto add = [&](const TensorView* v) {
      ops[nops++] = v;
      if (v->numel() == numel) bytes += dtype_size(v->dtype);  // broadcast operands stay in cache
    };
    if (variant_.weight_vector) add(w);
    if (variant_.pos_weight == BceForwardPosWeight::kVector) add(pw);
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

  void run(void* workspace) override {
    // One-element operands are read at launch time (the C ABI may fill the tensors after phase 1).
    BceForwardParams p = params_;
    if (weight_scalar_) p.factor = read_one(w_);
    if (variant_.pos_weight == BceForwardPosWeight::kScalar) p.pos_weight = read_one(pw_);
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

const TensorView* optional(const TensorView& t) { return core::present(t) ? &t : nullptr; }

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec binary_cross_entropy_with_logits_output_spec(const TensorView& self, const TensorView& target,
                                                        const TensorView& weight, const TensorView& pos_weight,
                                                        Reduction reduction) {
  const core::ReductionArg r = core::reduction_arg(reduction);
  ops::validate({self, target, ops::optional(weight), ops::optional(pos_weight), nullptr}, r);
  if (reduction == Reduction::kNone) return {target.dtype, self.shape};
  return {target.dtype, {}};
}

void binary_cross_entropy_with_logits(const TensorView& self, const TensorView& target, const TensorView& weight,
                                      const TensorView& pos_weight, Reduction reduction, const TensorView& out) {
  ops::BceForwardLaunch launch(self, target, ops::optional(weight), ops::optional(pos_weight),
                               core::reduction_arg(reduction), out);
  core::run_now_named(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(
    const aclTensor* self, const aclTensor* target, const aclTensor* weightOptional, const aclTensor* posWeightOptional,
    int64_t reduction, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_rebindable_executor(
      ops::kOp, {{"self", "target", "weightOptional", "posWeightOptional"}, {"out"}}, workspaceSize, executor, [=] {
        const core::ReductionArg r = core::reduction_from_code(reduction);
        core::require_not_null(ops::kOp, "self", self);
        core::require_not_null(ops::kOp, "target", target);
        core::require_not_null(ops::kOp, "out", out);
        const TensorView x = core::view_of(ops::kOp, "self", self);
        const TensorView t = core::view_of(ops::kOp, "target", target);
        const TensorView w = core::optional_view_of(ops::kOp, "weightOptional", weightOptional);
        const TensorView pw = core::optional_view_of(ops::kOp, "posWeightOptional", posWeightOptional);
        const TensorView o = core::view_of(ops::kOp, "out", out);
        return std::make_unique<ops::BceForwardLaunch>(x, t, weightOptional ? &w : nullptr,
                                                       posWeightOptional ? &pw : nullptr, r, o);
      });
}

extern "C" aclnnStatus aclnnBinaryCrossEntropyWithLogits(void* workspace, uint64_t workspaceSize,
                                                         aclOpExecutor* executor, const aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
