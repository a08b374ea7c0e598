#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_sort.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/dtype.h"

namespace tilegrad::ops {

StridedDims collapse_dims(const int64_t* shape, const int64_t* elem_strides, int ndim, int64_t elem_size) {
  StridedDims d;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 1) continue;
    const int64_t s = elem_strides[i] * elem_size;
    if (d.ndim > 0 && d.strides[d.ndim - 1] == s * shape[i]) {  // outer dim steps over this one whole
      d.shape[d.ndim - 1] *= shape[i];
      d.strides[d.ndim - 1] = s;
      continue;
    }
    d.shape[d.ndim] = shape[i];
    d.strides[d.ndim] = s;
    ++d.ndim;
  }
  return d;
}

int64_t offset_of(const StridedDims& d, int64_t pos) {
  int64_t off = 0;
  for (int k = d.ndim - 1; k >= 0; --k) {
    off += (pos % d.shape[k]) * d.strides[k];
    pos /= d.shape[k];
  }
  return off;
}

namespace {

// Visits the byte offsets of flat positions [begin, end) in order: fn(pos, offset).
template <class Fn>
void walk(const StridedDims& d, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  if (d.ndim <= 1) {
    const int64_t s = d.ndim ? d.strides[0] : 0;
    for (int64_t i = begin; i < end; ++i) fn(i, i * s);
    return;
  }
  const int inner = d.ndim - 1;
  int64_t idx[kMaxDims] = {};
  int64_t rem = begin;
  for (int k = inner; k >= 0; --k) {
    idx[k] = rem % d.shape[k];
    rem /= d.shape[k];
  }
  int64_t base = 0;
  for (int k = 0; k < inner; ++k) base += idx[k] * d.strides[k];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t n = std::min(d.shape[inner] - idx[inner], end - pos);
    const int64_t s = d.strides[inner];
    for (int64_t j = 0; j < n; ++j) fn(pos + j, base + (idx[inner] + j) * s);
    pos += n;
    idx[inner] = 0;
    for (int k = inner - 1; k >= 0; --k) {
      base += d.strides[k];
      if (++idx[k] < d.shape[k]) break;
      base -= idx[k] * d.strides[k];
      idx[k] = 0;
    }
  }
}

template <class T>
inline bool int_key(const char* p, int64_t V, int64_t* key) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  const int64_t k = static_cast<int64_t>(v);
  *key = k;
  return k >= 0 && k < V;
}

inline bool float_key(double x, int64_t V, int64_t* key) {
  // Truncation toward zero: valid iff -1 < x < V (NaN fails both comparisons).
  if (!(x > -1.0 && x < static_cast<double>(V))) return false;
  const int64_t k = static_cast<int64_t>(x);
  *key = k;
  return k < V;
}

template <class KeyOf>
int64_t convert_with(const IndexSource& src, int64_t begin, int64_t end, int64_t* keys, int64_t* hist, KeyOf key_of) {
  int64_t bad = -1;
  // The walk cannot break early; positions after the first bad one are skipped.
  walk(src.dims, begin, end, [&](int64_t pos, int64_t off) {
    if (bad >= 0) return;
    int64_t k;
    if (!key_of(src.data + off, &k)) {
      bad = pos;
      return;
    }
    if (keys) keys[pos] = k;
    if (hist) ++hist[k];
  });
  return bad;
}

}  // namespace

int64_t convert_indices(const IndexSource& src, int64_t begin, int64_t end, int64_t V, int64_t* keys, int64_t* hist) {
  switch (src.dtype) {
    case DType::kInt64: return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) { return int_key<int64_t>(p, V, k); });
    case DType::kInt32: return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) { return int_key<int32_t>(p, V, k); });
    case DType::kInt16: return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) { return int_key<int16_t>(p, V, k); });
    case DType::kInt8: return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) { return int_key<int8_t>(p, V, k); });
    case DType::kUInt8: return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) { return int_key<uint8_t>(p, V, k); });
    case DType::kBool:
      return convert_with(src, begin, end, keys, hist, [V](const char* p, int64_t* k) {
        *k = *p != 0;
        return *k < V;
      });
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kFloat64: {
      const DType dt = src.dtype;
      return convert_with(src, begin, end, keys, hist,
                          [V, dt](const char* p, int64_t* k) { return float_key(core::load_float_element(dt, p), V, k); });
    }
    default: return begin < end ? begin : -1;  // unreachable: the dtype was validated
  }
}

std::string index_value_str(const IndexSource& src, int64_t pos) {
  const char* p = src.data + offset_of(src.dims, pos);
  std::ostringstream os;
  switch (src.dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kFloat64: os << core::load_float_element(src.dtype, p); break;
    case DType::kBool: os << (*p != 0 ? "true" : "false"); break;
    default: {
      int64_t k = 0;
      switch (src.dtype) {
        case DType::kInt64: int_key<int64_t>(p, 0, &k); break;
        case DType::kInt32: int_key<int32_t>(p, 0, &k); break;
        case DType::kInt16: int_key<int16_t>(p, 0, &k); break;
        case DType::kInt8: int_key<int8_t>(p, 0, &k); break;
        default: int_key<uint8_t>(p, 0, &k); break;
      }
      os << k;
    }
  }
  return os.str();
}

void scatter_rows(const int64_t* keys, int64_t begin, int64_t end, const StridedDims& grad_rows, int64_t* cursor,
                  int64_t* src_rows) {
  walk(grad_rows, begin, end, [&](int64_t pos, int64_t off) { src_rows[cursor[keys[pos]]++] = off; });
}

}  // namespace tilegrad::ops
