// A tensor split into its two halves along one dimension, as the GLU families (SwiGLU, GeGLU) split
// their input: the validation of the split (rank, dim, even length), the half shape, and the two views
// with the tensor's strides, the first at its data, the second shape[d] / 2 elements further along d
// (no copy).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

// t (argument `arg` of `op`): rank 1..8 (a 0-d tensor has no halves), dim in [-rank, rank),
// shape[dim] even; else `status` (the families differ: GeGLU's hand-written aclnn layer reports
// 161002, SwiGLU's tiling 561002). Returns the normalized dim.
inline int require_even_split(Status status, const char* op, const char* arg, const TensorView& t, int64_t dim) {
  if (t.rank() < 1 || t.rank() > kMaxDims) fail(status, op, ": ", arg, " rank must be in [1, 8], got ", t.rank());
  if (dim < -t.rank() || dim >= t.rank()) {
    fail(status, op, ": dim must be in [", -t.rank(), ", ", t.rank() - 1, "], got ", dim);
  }
  const int d = static_cast<int>(dim < 0 ? dim + t.rank() : dim);
  if (t.shape[d] % 2 != 0) {
    fail(status, op, ": ", arg, " shape[", dim, "] must be even, got ", t.shape[d], " (shape ", shape_str(t.shape),
         ")");
  }
  return d;
}

// t's shape with dim d halved: the shape of each half.
inline std::vector<int64_t> half_shape(const TensorView& t, int d) {
  std::vector<int64_t> s = t.shape;
  s[d] /= 2;
  return s;
}

// (first half, second half) of t along d (shape[d] even).
inline std::pair<TensorView, TensorView> split_halves(const TensorView& t, int d) {
  TensorView a = t;
  a.shape[d] /= 2;
  TensorView b = a;
  b.data = static_cast<char*>(t.data) + a.shape[d] * t.strides[d] * dtype_size(t.dtype);
  return {a, b};
}

}  // namespace tilegrad::core
