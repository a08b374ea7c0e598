// Validation shared by aclnnGeGluV3 and its backward (and aclnnGeGlu / aclnnGeGluBackward, their
// activateLeft = false forms). The vendor's aclnn layer is hand-written here, so every rule is
// 161002 (unlike SwiGLU, whose shape rules come from its tiling as 561002).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "core/view_halves.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::geglu {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// self: rank 1..8, dim in [-rank, rank), shape[dim] even (161002). Returns the normalized dim.
inline int require_split(const char* op, const TensorView& self, int64_t dim) {
  return core::require_even_split(Status::kParamInvalid, op, "self", self, dim);
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
