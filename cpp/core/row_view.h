// A tensor seen as R rows of N elements: the leading dims index rows, the trailing k dims (gamma's
// rank, LayerNorm's normalizedShape) are a row. Shared by the row-wise operators (RMSNorm, AddRmsNorm,
// LayerNorm and their gradients; core/row_tiling.h plans their tiles). A row whose elements are dense
// (row-major, stride 1 after dropping size-1 dims) is handed to the kernels in place; any other row is
// gathered into / scattered from a contiguous scratch row. Pure address arithmetic (and one scalar
// widening of gamma): no kernel, no allocation.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

class RowView {
 public:
  RowView() = default;
  // t seen as rows over its first rank-k dims, each row its last k dims.
  RowView(const TensorView& t, int k) : data_(static_cast<char*>(t.data)), esize_(dtype_size(t.dtype)) {
    const int lead = t.rank() - k;
    for (int d = 0; d < t.rank(); ++d) {
      if (d < lead) {
        lead_shape_.push_back(t.shape[d]);
        lead_strides_.push_back(t.strides[d] * esize_);
      } else {
        row_shape_.push_back(t.shape[d]);
        row_strides_.push_back(t.strides[d] * esize_);
      }
    }
    int64_t expect = esize_;
    for (int d = k - 1; d >= 0; --d) {
      if (row_shape_[d] == 1) continue;
      dense_ = dense_ && row_strides_[d] == expect;
      expect *= row_shape_[d];
    }
  }
  // A view whose rows follow `lead_shape` (x's leading dims), each row one element: the rstd of the
  // grad, whose dims equal x's leading dims once size-1 dims are dropped (validated by the caller).
  static RowView per_row_scalar(const TensorView& t, const std::vector<int64_t>& lead_shape) {
    RowView v;
    v.data_ = static_cast<char*>(t.data);
    v.esize_ = dtype_size(t.dtype);
    int src = 0;
    for (int64_t n : lead_shape) {
      int64_t stride = 0;
      if (n != 1) {
        while (t.shape[src] == 1) ++src;
        stride = t.strides[src++] * v.esize_;
      }
      v.lead_shape_.push_back(n);
      v.lead_strides_.push_back(stride);
    }
    return v;
  }

  // The same rows at the new address of their tensor's data.
  void bind(void* data) { data_ = static_cast<char*>(data); }

  bool dense() const { return dense_; }
  // First element of row r.
  char* row(int64_t r) const {
    int64_t off = 0;
    for (int d = static_cast<int>(lead_shape_.size()) - 1; d >= 0 && r > 0; --d) {
      off += (r % lead_shape_[d]) * lead_strides_[d];
      r /= lead_shape_[d];
    }
    return data_ + off;
  }
  // Row r where a kernel can read it densely: in place, or gathered into `scratch`.
  const char* readable_row(int64_t r, char* scratch) const {
    if (dense_) return row(r);
    gather(r, scratch);
    return scratch;
  }
  // Row r copied to / from n contiguous elements at buf (same dtype).
  void gather(int64_t r, char* buf) const {
    for_each(r, [&](int64_t i, char* p) { std::memcpy(buf + i * esize_, p, esize_); });
  }
  void scatter(int64_t r, const char* buf) const {
    for_each(r, [&](int64_t i, char* p) { std::memcpy(p, buf + i * esize_, esize_); });
  }
  // Row r widened to fp32 into out (n floats), from elements of `dtype`: gamma, once per launch.
  void widen_to_float(int64_t r, DType dtype, float* out) const {
    for_each(r, [&](int64_t i, char* p) { out[i] = static_cast<float>(load_float_element(dtype, p)); });
  }
  // f(i, address of element i) for the elements of row r in row-major order.
  template <class F>
  void for_each(int64_t r, F&& f) const {
    const int k = static_cast<int>(row_shape_.size());
    int64_t total = 1;
    for (int64_t n : row_shape_) total *= n;
    std::vector<int64_t> idx(k, 0);
    char* p = row(r);
    for (int64_t i = 0; i < total; ++i) {
      f(i, p);
      for (int d = k - 1; d >= 0; --d) {  // odometer over the row's dims
        p += row_strides_[d];
        if (++idx[d] < row_shape_[d]) break;
        p -= row_strides_[d] * row_shape_[d];
        idx[d] = 0;
      }
    }
  }

 private:
  char* data_ = nullptr;
  int64_t esize_ = 4;
  bool dense_ = true;
  std::vector<int64_t> lead_shape_, lead_strides_;  // bytes
  std::vector<int64_t> row_shape_, row_strides_;    // bytes
};

}  // namespace tilegrad::core
