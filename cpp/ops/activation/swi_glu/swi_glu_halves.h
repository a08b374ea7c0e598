// The SwiGLU family's split of a tensor into its two halves along `dim` (aclnnSwiGlu, aclnnSwiGluGrad;
// the family folder holds it): two views with the tensor's strides, the
// first at its data, the second shape[dim]/2 elements further along dim. Validation of dim and the
// even length is the caller's; this only builds views.
#pragma once

#include <cstdint>
#include <utility>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::swiglu {

// dim in [-rank, rank) to [0, rank).
inline int normalize_dim(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

// (first half, second half) of t along d (shape[d] even).
inline std::pair<TensorView, TensorView> halves(const TensorView& t, int d) {
  TensorView a = t;
  a.shape[d] /= 2;
  TensorView b = a;
  b.data = static_cast<char*>(t.data) + a.shape[d] * t.strides[d] * dtype_size(t.dtype);
  return {a, b};
}

}  // namespace tilegrad::ops::swiglu
