// Validation shared by aclnnGeGluV3 and its backward (and aclnnGeGlu / aclnnGeGluBackward, their
// activateLeft = false forms). The vendor's aclnn layer is hand-written here, so every rule is
// 161002 (unlike SwiGLU, whose shape rules come from its tiling as 561002).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::geglu {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// self: rank 1..8 (a 0-d tensor has no halves), dim in [-rank, rank), shape[dim] even. Returns the
// normalized dim.
inline int require_split(const char* op, const TensorView& self, int64_t dim) {
  core::check(self.rank() >= 1 && self.rank() <= kMaxDims, op, ": self rank must be in [1, 8], got ", self.rank());
  core::check(dim >= -self.rank() && dim < self.rank(), op, ": dim must be in [", -self.rank(), ", ",
              self.rank() - 1, "], got ", dim);
  const int d = static_cast<int>(dim < 0 ? dim + self.rank() : dim);
  core::check(self.shape[d] % 2 == 0, op, ": self shape[", dim, "] must be even, got ", self.shape[d], " (shape ",
              shape_str(self.shape), ")");
  return d;
}

// self's shape with dim d halved: the shape of out, outGelu, gradOutput and gelu.
inline std::vector<int64_t> half_shape(const TensorView& self, int d) {
  std::vector<int64_t> s = self.shape;
  s[d] /= 2;
  return s;
}

// `arg` has the half shape (message names the rule and both shapes).
inline void require_half_shape(const char* op, const char* arg, const TensorView& t, const std::vector<int64_t>& want,
                               int64_t dim) {
  core::check(t.shape == want, op, ": ", arg, " shape must be self shape with dim ", dim, " halved ",
              shape_str(want), ", got ", shape_str(t.shape));
}

// The vendor's int64 code: true for tanh, false for erf (0 none / 1 tanh, anything else 161002).
inline bool is_tanh(const char* op, int64_t approximate) {
  core::check(approximate == 0 || approximate == 1, op, ": approximate must be 0 (none) or 1 (tanh), got ",
              approximate);
  return approximate == 1;
}

}  // namespace tilegrad::ops::geglu
