// Vec1: element access to a 1-D strided view (or a 0-d one, element 0), for the per-row scalars of
// the loss operators (targets, masks, per-row statistics, losses). Not for hot loops over elements:
// every access converts through the view's dtype.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

struct Vec1 {
  char* data = nullptr;
  DType dtype = DType::kUndefined;
  int64_t stride = 1;  // elements

  Vec1() = default;
  explicit Vec1(const TensorView& t)
      : data(static_cast<char*>(t.data)), dtype(t.dtype), stride(t.rank() >= 1 ? t.strides[0] : 1) {}

  char* ptr(int64_t i) const { return data + i * stride * dtype_size(dtype); }

  // Element i of a float32 / float16 / bfloat16 view, widened to float32.
  float f32(int64_t i) const { return static_cast<float>(load_float_element(dtype, ptr(i))); }

  // Stores v rounded once (to nearest even) to the view's float dtype.
  void set_f32(int64_t i, float v) const {
    if (dtype == DType::kFloat32) {
      std::memcpy(ptr(i), &v, 4);
      return;
    }
    const uint16_t h = dtype == DType::kFloat16 ? f32_to_f16(v) : f32_to_bf16(v);
    std::memcpy(ptr(i), &h, 2);
  }

  // Element i of an int64 / int32 view; of any one-byte view (uint8, bool) as its unsigned value.
  int64_t integer(int64_t i) const {
    if (dtype == DType::kInt64) {
      int64_t v;
      std::memcpy(&v, ptr(i), 8);
      return v;
    }
    if (dtype == DType::kInt32) {
      int32_t v;
      std::memcpy(&v, ptr(i), 4);
      return v;
    }
    return static_cast<uint8_t>(*ptr(i));
  }

  // Stores v into an int64 view, else (int32) truncated to 32 bits.
  void set_integer(int64_t i, int64_t v) const {
    if (dtype == DType::kInt64) {
      std::memcpy(ptr(i), &v, 8);
      return;
    }
    const int32_t w = static_cast<int32_t>(v);
    std::memcpy(ptr(i), &w, 4);
  }
};

}  // namespace tilegrad::core
