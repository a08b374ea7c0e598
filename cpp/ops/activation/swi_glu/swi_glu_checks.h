// Validation shared by aclnnSwiGlu and aclnnSwiGluGrad. Codes as the vendor's generated layer:
// dtypes 161002; ranks, dim, shapes 561002 (its tiling checks, which the documents list as 161002
// for dim); tilegrad's own safety rules (well-formed views, overlapping outputs) 161002.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "core/view_halves.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::swiglu {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

template <class... Parts>
void check_shape(bool ok, const Parts&... parts) {
  if (!ok) core::fail(Status::kInnerTilingError, parts...);
}

// x: rank 1..8, dim in [-rank, rank), shape[dim] even (561002). Returns the normalized dim.
inline int require_split(const char* op, const char* arg, const TensorView& x, int64_t dim) {
  return core::require_even_split(Status::kInnerTilingError, op, arg, x, dim);
}

}  // namespace tilegrad::ops::swiglu
