// A tensor split into its two halves along one dimension: two views with the tensor's strides, the
// first at its data, the second shape[d] / 2 elements further along d (no copy). Validation of d and
// of the even length is the caller's; this only builds views. (The GLU families split their input so.)
#pragma once

#include <utility>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

// (first half, second half) of t along d (shape[d] even).
inline std::pair<TensorView, TensorView> split_halves(const TensorView& t, int d) {
  TensorView a = t;
  a.shape[d] /= 2;
  TensorView b = a;
  b.data = static_cast<char*>(t.data) + a.shape[d] * t.strides[d] * dtype_size(t.dtype);
  return {a, b};
}

}  // namespace tilegrad::core
