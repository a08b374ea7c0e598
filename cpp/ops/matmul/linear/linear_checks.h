// Validation shared by linear and linear_backward (README.md): dtypes, ranks, shapes and the
// layouts the GEMM takes are 161002 (as the vendor's aclnnMatmul checks), like tilegrad's own
// safety rules (well-formed views, overlapping outputs).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "core/gemm.h"
#include "core/tensor.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::linear {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// A 2-D operand: well formed, rank 2, `ref`'s dtype (or a float dtype when ref is itself).
inline void require_matrix(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                           const TensorView& ref) {
  core::require_well_formed(op, arg, t);
  core::require_dtype(op, arg, t, kFloatTypes);
  core::require_same_dtype(op, arg, t, ref_arg, ref);
  core::require_rank(op, arg, t, 2, 2);
}

// The GEMM reads a matrix whose one stride is 1 and whose other stride covers that dimension.
// (An empty matrix is never read.)
inline void require_gemm_layout(const char* op, const char* arg, const TensorView& t) {
  if (t.shape[0] != 0 && t.shape[1] != 0 && !core::gemm_layout_ok(t.shape[0], t.shape[1], t.strides[0], t.strides[1]))
    core::fail(Status::kParamInvalid, op, ": ", arg, " must be row- or column-major with a leading dimension, got shape ",
               shape_str(t.shape), " strides ", shape_str(t.strides));
}

// The GEMM view of a checked 2-D tensor.
inline core::GemmMatrix gemm_matrix(const TensorView& t) {
  return core::GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
}

// A 1-D bias-like vector of n elements and ref's dtype.
inline void require_vector(const char* op, const char* arg, const TensorView& t, int64_t n, const char* ref_arg,
                           const TensorView& ref) {
  core::require_well_formed(op, arg, t);
  core::require_same_dtype(op, arg, t, ref_arg, ref);
  core::require_shape(op, arg, t, {n}, "[weight.shape[0]] =");
}

// An output: no two of its indices address one element, and it shares no memory with the inputs.
inline void require_output(const char* op, const char* arg, const TensorView& out,
                           std::initializer_list<std::pair<const char*, const TensorView*>> inputs) {
  core::require_no_self_overlap(op, arg, out);
  for (const auto& [name, in] : inputs)
    if (core::present(*in)) core::require_no_partial_overlap(op, arg, out, name, *in, false);
}

}  // namespace tilegrad::ops::linear
