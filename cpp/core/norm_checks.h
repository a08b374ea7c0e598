// Validation shared by the normalisation families: the float dtypes and the row-shape helpers (RMSNorm,
// AddRmsNorm, LayerNorm), gamma's rules (aclnnRmsNorm, aclnnRmsNormGrad, aclnnAddRmsNorm). Codes as
// the vendor's generated layer: dtypes 161002; ranks, shapes and attribute values 561002 (its tiling
// checks), or 161002 where the vendor checks them in a hand-written aclnn layer (`check_shape_as`);
// tilegrad's own safety rules (well-formed views, overlapping outputs) 161002 as for every operator.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core::norm {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// Shape rules fail as the vendor's tiling checks do (561002), or with `code` where the vendor checks
// them in a hand-written aclnn layer (aclnnAddRmsNorm: 161002).
template <class... Parts>
void check_shape_as(Status code, bool ok, const Parts&... parts) {
  if (!ok) core::fail(code, parts...);
}

template <class... Parts>
void check_shape(bool ok, const Parts&... parts) {
  check_shape_as(Status::kInnerTilingError, ok, parts...);
}

// gamma's dtype: x's, or float32 when x is float16 / bfloat16 (the vendor's five tuples).
inline void require_gamma_dtype(const char* op, const TensorView& gamma, const TensorView& x) {
  core::require_dtype(op, "gamma", gamma, kFloatTypes);
  core::check(gamma.dtype == x.dtype || gamma.dtype == DType::kFloat32, op, ": gamma dtype must be x's dtype (",
              dtype_name(x.dtype), ") or float32, got ", dtype_name(gamma.dtype));
}

inline void require_rank_1_to_8(const char* op, const char* arg, const TensorView& t,
                                Status code = Status::kInnerTilingError) {
  check_shape_as(code, t.rank() >= 1 && t.rank() <= kMaxDims, op, ": ", arg, " rank must be in [1, 8], got ", t.rank());
}

// gamma: rank 1..rank(x), equal to x's trailing dims, with no zero dim unless `allow_empty`.
// Returns k = rank(gamma).
inline int require_gamma_shape(const char* op, const TensorView& gamma, const char* x_arg, const TensorView& x,
                               Status code = Status::kInnerTilingError, bool allow_empty = false) {
  require_rank_1_to_8(op, "gamma", gamma, code);
  check_shape_as(code, gamma.rank() <= x.rank(), op, ": gamma rank must be at most ", x_arg, " rank ", x.rank(),
                 ", got ", gamma.rank());
  const int k = gamma.rank();
  const std::vector<int64_t> trailing(x.shape.end() - k, x.shape.end());
  check_shape_as(code, gamma.shape == trailing, op, ": gamma shape must equal the trailing dims of ", x_arg, " ",
                 shape_str(trailing), ", got ", shape_str(gamma.shape));
  for (int64_t d : gamma.shape)
    check_shape_as(code, allow_empty || d > 0, op, ": gamma must not be empty, got shape ", shape_str(gamma.shape));
  return k;
}

inline std::vector<int64_t> leading(const TensorView& x, int k) {
  return std::vector<int64_t>(x.shape.begin(), x.shape.end() - k);
}

inline int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The rstd shape the forward writes: x's leading dims, then k ones ((2,3,4,8), gamma (4,8) -> (2,3,1,1)).
inline std::vector<int64_t> rstd_shape(const TensorView& x, int k) {
  std::vector<int64_t> s = leading(x, k);
  s.resize(x.shape.size(), 1);
  return s;
}

inline std::vector<int64_t> drop_ones(const std::vector<int64_t>& s) {
  std::vector<int64_t> r;
  for (int64_t d : s)
    if (d != 1) r.push_back(d);
  return r;
}

}  // namespace tilegrad::core::norm
