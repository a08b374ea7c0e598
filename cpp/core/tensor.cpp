#include "core/tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>

#include "core/error.h"

namespace tilegrad {

int64_t dtype_size(DType d) {
  switch (d) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
    case DType::kInt64: case DType::kUInt64: case DType::kFloat64: case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
    default: return 0;
  }
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    default: return "undefined";
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> TensorView::contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return s;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace core {

std::string dtype_list(std::initializer_list<DType> allowed) {
  std::string s;
  for (DType d : allowed) s += (s.empty() ? "" : ", ") + std::string(dtype_name(d));
  return s;
}

void require_dtype(const char* op, const char* arg, const TensorView& t, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  fail(Status::kParamInvalid, op, ": ", arg, " dtype must be one of {", dtype_list(allowed), "}, got ",
       dtype_name(t.dtype));
}

void require_same_dtype(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                        const TensorView& ref) {
  check(t.dtype == ref.dtype, op, ": ", arg, " dtype ", dtype_name(t.dtype), " != ", ref_arg, " dtype ",
        dtype_name(ref.dtype));
}

void require_rank_at_most(const char* op, const char* arg, const TensorView& t, int max_rank) {
  check(t.rank() <= max_rank, op, ": ", arg, " rank must be at most ", max_rank, ", got ", t.rank(), " (shape ",
        shape_str(t.shape), ")");
}

void require_rank(const char* op, const char* arg, const TensorView& t, int lo, int hi) {
  if (lo == hi)
    check(t.rank() == lo, op, ": ", arg, " must have rank ", lo, ", got rank ", t.rank(), " (shape ",
          shape_str(t.shape), ")");
  else
    check(t.rank() >= lo && t.rank() <= hi, op, ": ", arg, " rank must be in [", lo, ", ", hi, "], got ", t.rank(),
          " (shape ", shape_str(t.shape), ")");
}

void require_shape(const char* op, const char* arg, const TensorView& t, const std::vector<int64_t>& shape,
                   const char* rule_source) {
  check(t.shape == shape, op, ": ", arg, " shape ", shape_str(t.shape), " != ", rule_source, " ", shape_str(shape));
}

void require_well_formed(const char* op, const char* arg, const TensorView& t) {
  check(t.strides.size() == t.shape.size(), op, ": ", arg, " has ", t.shape.size(), " dims but ", t.strides.size(),
        " strides");
  for (int64_t d : t.shape) check(d >= 0, op, ": ", arg, " has a negative dimension in shape ", shape_str(t.shape));
  // Element count and byte extent must fit int64 (numel(), byte_extent() and the kernels rely on it).
  bool empty = false, overflow = false;
  for (int64_t d : t.shape) empty |= d == 0;
  if (!empty) {
    int64_t n = 1, extent = 0;
    for (int i = 0; i < t.rank(); ++i) {
      int64_t span = 0;
      overflow |= __builtin_mul_overflow(n, t.shape[i], &n);
      overflow |= t.strides[i] == INT64_MIN || __builtin_mul_overflow(t.shape[i] - 1, std::llabs(t.strides[i]), &span);
      overflow |= __builtin_add_overflow(extent, span, &extent);
    }
    overflow |= __builtin_mul_overflow(extent + 1, std::max<int64_t>(dtype_size(t.dtype), 1), &extent);
  }
  check(!overflow, op, ": ", arg, " shape ", shape_str(t.shape), " with strides ", shape_str(t.strides),
        " overflows 64-bit indexing");
  if (t.numel() > 0 && t.data == nullptr)
    fail(Status::kParamNullptr, op, ": ", arg, " data pointer is null but the tensor has ", t.numel(), " elements");
}

ByteExtent byte_extent(const TensorView& t) {
  if (t.numel() == 0) return {};
  const int64_t es = dtype_size(t.dtype);
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.rank(); ++i) {
    const int64_t span = (t.shape[i] - 1) * t.strides[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto base = reinterpret_cast<intptr_t>(t.data);
  return {static_cast<uintptr_t>(base + lo * es), static_cast<uintptr_t>(base + (hi + 1) * es)};
}

void require_no_self_overlap(const char* op, const char* arg, const TensorView& t) {
  // Sufficient condition for distinct addresses: sorted by |stride|, each stride is at least the
  // extent spanned by all smaller dims. An empty view has no elements to collide.
  if (t.numel() == 0) return;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (int i = 0; i < t.rank(); ++i)
    if (t.shape[i] > 1) dims.emplace_back(std::llabs(t.strides[i]), t.shape[i]);
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (auto [stride, size] : dims) {
    check(stride >= extent, op, ": ", arg, " has overlapping elements (strides ", shape_str(t.strides),
          " for shape ", shape_str(t.shape), "); outputs need distinct addresses");
    extent = stride * (size - 1) + extent;
  }
}

void require_no_partial_overlap(const char* op, const char* out_arg, const TensorView& out, const char* in_arg,
                                const TensorView& in, bool allow_exact_alias) {
  const ByteExtent a = byte_extent(out), b = byte_extent(in);
  if (a.lo == a.hi || b.lo == b.hi || a.hi <= b.lo || b.hi <= a.lo) return;
  const bool exact = out.data == in.data && out.dtype == in.dtype && out.shape == in.shape && out.strides == in.strides;
  if (exact && allow_exact_alias) return;
  fail(Status::kParamInvalid, op, ": ", out_arg, " overlaps ", in_arg,
       exact ? " (in-place is not supported by this operator)" : " without being the same view (only exact in-place aliasing is allowed)");
}

bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

std::vector<int64_t> broadcast_shapes(const char* op, const char* arg_a, const std::vector<int64_t>& a,
                                      const char* arg_b, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    check(da == db || da == 1 || db == 1, op, ": ", arg_a, " shape ", shape_str(a), " and ", arg_b, " shape ",
          shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace core
}  // namespace tilegrad
