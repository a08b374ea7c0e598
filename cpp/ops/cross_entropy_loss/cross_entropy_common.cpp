#include "ops/cross_entropy_loss/cross_entropy_common.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace tilegrad::ops::ce {

bool parse_reduction(const char* s, Reduction* out) {
  if (s == nullptr || std::strcmp(s, "mean") == 0) {
    *out = Reduction::kMean;
  } else if (std::strcmp(s, "sum") == 0) {
    *out = Reduction::kSum;
  } else if (std::strcmp(s, "none") == 0) {
    *out = Reduction::kNone;
  } else {
    return false;
  }
  return true;
}

Reduction require_attributes(const char* op, const char* reduction, double label_smoothing) {
  Reduction r = Reduction::kMean;
  core::check(parse_reduction(reduction, &r), op, ": reduction must be one of none, mean, sum, got '",
              reduction ? reduction : "", "'");
  core::check(label_smoothing >= 0.0 && label_smoothing <= 1.0, op, ": labelSmoothing must be in [0, 1], got ",
              label_smoothing);
  return r;
}

void require_plain_reduction(const char* op, const std::string& reduction) {
  if (reduction.find('\0') == std::string::npos) return;
  std::string shown;
  for (char c : reduction) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
  core::fail(Status::kParamInvalid, op, ": reduction must be one of none, mean, sum, got '", shown,
             "' (contains a NUL character)");
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kNone: return "none";
    case Reduction::kSum: return "sum";
    default: return "mean";
  }
}

void require_loss_shape(const char* op, const char* arg, const TensorView& t, Reduction r, int64_t n) {
  if (r == Reduction::kNone)
    core::check(t.rank() == 1 && t.shape[0] == n, op, ": ", arg, " shape ", shape_str(t.shape), " must be [", n,
                "] (N) for reduction none");
  else
    core::check(t.rank() == 0 || (t.rank() == 1 && t.shape[0] == 1), op, ": ", arg, " shape ", shape_str(t.shape),
                " must be [] or [1] for reduction ", reduction_name(r));
}

void require_same_dtype(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                        const TensorView& ref) {
  core::check(t.dtype == ref.dtype, op, ": ", arg, " dtype ", dtype_name(t.dtype), " != ", ref_arg, " dtype ",
              dtype_name(ref.dtype));
}

namespace {
inline const char* element(const TensorView& t, int64_t index) {
  // 1-d (or 0-d) views only: index along the single dim.
  const int64_t stride = t.rank() == 0 ? 0 : t.strides[0];
  return static_cast<const char*>(t.data) + index * stride * dtype_size(t.dtype);
}
}  // namespace

float load_float(const TensorView& t, int64_t index) {
  return static_cast<float>(core::load_float_element(t.dtype, element(t, index)));
}

void store_float(const TensorView& t, int64_t index, float value) {
  char* p = const_cast<char*>(element(t, index));
  switch (t.dtype) {
    case DType::kFloat32: std::memcpy(p, &value, 4); return;
    case DType::kFloat16: {
      const uint16_t h = core::f32_to_f16(value);
      std::memcpy(p, &h, 2);
      return;
    }
    default: {
      const uint16_t h = core::f32_to_bf16(value);
      std::memcpy(p, &h, 2);
      return;
    }
  }
}

int64_t load_target(const TensorView& t, int64_t index) {
  const char* p = element(t, index);
  if (t.dtype == DType::kInt32) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

TargetScan scan_targets(const char* op, const TensorView& target, const TensorView& weight, int64_t classes,
                        int64_t ignore_index) {
  TargetScan s;
  const int64_t n = target.shape.empty() ? 0 : target.shape[0];
  const float* w = static_cast<const float*>(weight.data);  // fp32 (validated) or null
  const int64_t ws = weight.data != nullptr && classes > 1 ? weight.strides[0] : 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = load_target(target, i);
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
  for (int64_t c = 0; c < classes; ++c) scratch[c] = load_float(weight, c);
  return scratch;
}

}  // namespace tilegrad::ops::ce
