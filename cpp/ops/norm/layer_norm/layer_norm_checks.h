// Validation and per-row statistics shared by aclnnLayerNorm and aclnnLayerNormBackward. Every rule
// fails with 161002 as in the vendor's hand-written aclnn layer (null required arguments: 161001).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/norm_checks.h"
#include "core/tensor.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::ln {

// The float dtypes and row-shape helpers of every normalisation family (core/norm_checks.h).
using core::norm::drop_ones;
using core::norm::kFloatTypes;
using core::norm::product;

// x: rank 1..8 of a float dtype; normalized_shape: 1..rank(x) dims equal to x's trailing ones.
// Returns k = len(normalized_shape).
inline int require_normalized_shape(const char* op, const char* x_arg, const TensorView& x,
                                    const std::vector<int64_t>& ns) {
  core::require_dtype(op, x_arg, x, kFloatTypes);
  core::check(x.rank() >= 1 && x.rank() <= kMaxDims, op, ": ", x_arg, " rank must be in [1, 8], got ", x.rank());
  const int k = static_cast<int>(ns.size());
  core::check(k >= 1 && k <= x.rank(), op, ": normalizedShape must have 1 to ", x_arg, " rank (", x.rank(),
              ") dims, got ", shape_str(ns));
  const std::vector<int64_t> trailing(x.shape.end() - k, x.shape.end());
  core::check(trailing == ns, op, ": normalizedShape must equal the trailing dims of ", x_arg, " ",
              shape_str(trailing), ", got ", shape_str(ns));
  return k;
}

// weight and bias (each optional): normalized_shape, x's dtype or float32, one dtype when both given.
inline void require_params(const char* op, const TensorView& w, const TensorView& b, const TensorView& x,
                           const std::vector<int64_t>& ns) {
  for (const auto& [arg, t] : {std::pair{"weightOptional", &w}, {"biasOptional", &b}}) {
    if (!core::present(*t)) continue;
    core::require_well_formed(op, arg, *t);
    core::require_dtype(op, arg, *t, kFloatTypes);
    core::check(t->dtype == x.dtype || t->dtype == DType::kFloat32, op, ": ", arg, " dtype must be input's (",
                dtype_name(x.dtype), ") or float32, got ", dtype_name(t->dtype));
    core::check(t->shape == ns, op, ": ", arg, " shape must equal normalizedShape ", shape_str(ns), ", got ",
                shape_str(t->shape));
  }
  if (core::present(w) && core::present(b))
    core::require_same_dtype(op, "biasOptional", b, "weightOptional", w);
}

// A per-row statistic (mean, rstd): float32 or x's dtype, x's leading dims (size-1 dims aside: the
// forward's keepdim shape [A..., 1, ..., 1] and the squeezed [A...] both pass).
inline void require_stats(const char* op, const char* arg, const TensorView& t, const TensorView& x,
                          const std::vector<int64_t>& lead) {
  core::require_well_formed(op, arg, t);
  core::check(t.dtype == DType::kFloat32 || t.dtype == x.dtype, op, ": ", arg, " dtype must be float32 or input's (",
              dtype_name(x.dtype), "), got ", dtype_name(t.dtype));
  core::check(t.rank() <= kMaxDims && drop_ones(t.shape) == drop_ones(lead), op, ": ", arg,
              " shape must be input's leading dims ", shape_str(lead), " (size-1 dims aside), got ",
              shape_str(t.shape));
}

// v rounded once to `dtype` (float32, float16 or bfloat16) and stored at p.
inline void store_float_as(DType dtype, float v, void* p) {
  if (dtype == DType::kFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kFloat16 ? core::f32_to_f16(v) : core::f32_to_bf16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace tilegrad::ops::ln
