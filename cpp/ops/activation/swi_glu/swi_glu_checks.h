// Validation shared by aclnnSwiGlu and aclnnSwiGluGrad. Codes as the vendor's generated layer:
// dtypes 161002; ranks, dim, shapes 561002 (its tiling checks, which the documents list as 161002
// for dim); tilegrad's own safety rules (well-formed views, overlapping outputs) 161002.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::swiglu {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

template <class... Parts>
void check_shape(bool ok, const Parts&... parts) {
  if (!ok) core::fail(Status::kInnerTilingError, parts...);
}

// x: rank 1..8, dim in [-rank, rank), shape[dim] even. Returns the normalized dim.
inline int require_split(const char* op, const char* arg, const TensorView& x, int64_t dim) {
  check_shape(x.rank() >= 1 && x.rank() <= kMaxDims, op, ": ", arg, " rank must be in [1, 8], got ", x.rank());
  check_shape(dim >= -x.rank() && dim < x.rank(), op, ": dim must be in [", -x.rank(), ", ", x.rank() - 1, "], got ",
              dim);
  const int d = static_cast<int>(dim < 0 ? dim + x.rank() : dim);
  check_shape(x.shape[d] % 2 == 0, op, ": ", arg, " shape[", dim, "] must be even, got ", x.shape[d], " (shape ",
              shape_str(x.shape), ")");
  return d;
}

// x's shape with dim d halved.
inline std::vector<int64_t> half_shape(const TensorView& x, int d) {
  std::vector<int64_t> s = x.shape;
  s[d] /= 2;
  return s;
}

}  // namespace tilegrad::ops::swiglu
