#include "ops/loss/cross_entropy/cross_entropy_common.h"

#include "core/error.h"
#include "core/vec1.h"

namespace tilegrad::ops::ce {

Attributes attributes_of(const CrossEntropyOptions& o) {
  return {core::reduction_arg(o.reduction), o.ignore_index, o.label_smoothing, o.lse_square_scale_for_zloss};
}

Attributes attributes_of(const char* reduction, int64_t ignore_index, double label_smoothing, double zscale) {
  return {core::reduction_from_name(reduction), ignore_index, label_smoothing, zscale};
}

Reduction require_attributes(const char* op, const Attributes& a) {
  core::require_valid(op, a.reduction);
  core::check(a.label_smoothing >= 0.0 && a.label_smoothing <= 1.0, op, ": labelSmoothing must be in [0, 1], got ",
              a.label_smoothing);
  return a.reduction.value;
}

void require_loss_shapes(const char* op, const core::ReductionArg& r, int64_t n,
                         std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  if (!r.valid()) return;
  for (const auto& [arg, t] : tensors) {
    if (t == nullptr) continue;
    if (r.value == Reduction::kNone)
      core::check(t->rank() == 1 && t->shape[0] == n, op, ": ", arg, " shape ", shape_str(t->shape), " must be [",
                  n, "] (N) for reduction none");
    else
      core::check(t->rank() == 0 || (t->rank() == 1 && t->shape[0] == 1), op, ": ", arg, " shape ",
                  shape_str(t->shape), " must be [] or [1] for reduction ", core::reduction_name(r.value));
  }
}

TargetScan scan_targets(const char* op, const TensorView& target, const TensorView& weight, int64_t classes,
                        int64_t ignore_index) {
  TargetScan s;
  const int64_t n = target.shape.empty() ? 0 : target.shape[0];
  const core::Vec1 targets(target);
  const float* w = static_cast<const float*>(weight.data);  // fp32 (validated) or null
  const int64_t ws = weight.data != nullptr && classes > 1 ? weight.strides[0] : 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets.integer(i);
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes)
      core::fail_index(op, ": target[", i, "] = ", t, " is out of range [0, ", classes, ") and is not ignoreIndex ",
                       ignore_index);
    s.weight_sum += w ? static_cast<double>(w[t * ws]) : 1.0;
    ++s.kept;
  }
  return s;
}

double weight_total(const TensorView& weight, int64_t classes) {
  if (weight.data == nullptr) return static_cast<double>(classes);
  // fp32 (validated); strided access through the stride, summed in index order.
  const float* w = static_cast<const float*>(weight.data);
  const int64_t stride = classes > 1 ? weight.strides[0] : 1;
  double total = 0;
  for (int64_t c = 0; c < classes; ++c) total += w[c * stride];
  return total;
}

bool weight_needs_copy(const TensorView& weight) {
  return weight.data != nullptr && weight.numel() > 1 && weight.strides[0] != 1;
}

const float* contiguous_weight(const TensorView& weight, int64_t classes, float* scratch) {
  if (weight.data == nullptr) return nullptr;
  if (!weight_needs_copy(weight)) return static_cast<const float*>(weight.data);
  const core::Vec1 w(weight);
  for (int64_t c = 0; c < classes; ++c) scratch[c] = w.f32(c);
  return scratch;
}

}  // namespace tilegrad::ops::ce
