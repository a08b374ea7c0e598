// Checks on TensorViews shared by every operator's validation. Each throws tilegrad::Error
// (161002 unless stated) with a message "<op>: <arg> <rule>, got <value>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

std::string dtype_list(std::initializer_list<DType> allowed);  // "float32, float16, bfloat16"

// An optional tensor was given: anything but the empty TensorView{} (no data, no dtype), which is
// what an absent tensor becomes on every way in (a null aclTensor*, Python's None, a null pointer
// or TensorView{} in the native API). A view with data but no dtype counts as given, so it fails its
// dtype check instead of being silently taken for "absent".
inline bool present(const TensorView& t) { return t.dtype != DType::kUndefined || t.data != nullptr; }

void require_dtype(const char* op, const char* arg, const TensorView& t, std::initializer_list<DType> allowed);
// t has the dtype of the reference tensor ref ("<op>: weight dtype float16 != input dtype bfloat16").
void require_same_dtype(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                        const TensorView& ref);
void require_rank_at_most(const char* op, const char* arg, const TensorView& t, int max_rank = kMaxDims);
void require_rank(const char* op, const char* arg, const TensorView& t, int lo, int hi);
void require_shape(const char* op, const char* arg, const TensorView& t, const std::vector<int64_t>& shape,
                   const char* rule_source);
// Consistency of the view itself: strides count equals rank, no negative dimension, non-null data
// when it has elements.
void require_well_formed(const char* op, const char* arg, const TensorView& t);
// The output must not have two indices addressing the same element (e.g. a zero stride).
void require_no_self_overlap(const char* op, const char* arg, const TensorView& t);
// out may equal `in` exactly (same data, dtype, shape, strides) when allow_exact_alias; any other
// overlap of their byte ranges is an error.
void require_no_partial_overlap(const char* op, const char* out_arg, const TensorView& out, const char* in_arg,
                                const TensorView& in, bool allow_exact_alias);

// NumPy broadcasting of a to b's shape ("can a broadcast to target?").
bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to);
// Broadcast result of two shapes; throws naming both args if incompatible.
std::vector<int64_t> broadcast_shapes(const char* op, const char* arg_a, const std::vector<int64_t>& a,
                                      const char* arg_b, const std::vector<int64_t>& b);

// Byte range [lo, hi) the view's elements occupy (lo == hi for an empty view).
struct ByteExtent {
  uintptr_t lo = 0, hi = 0;
};
ByteExtent byte_extent(const TensorView& t);

// float32, float16, bfloat16 (inline: the Python module uses it too).
inline bool is_float_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

}  // namespace tilegrad::core
