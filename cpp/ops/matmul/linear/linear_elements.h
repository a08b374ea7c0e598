// Element access shared by linear and linear_backward: an fp32 value in, one rounding out.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/parallel.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::linear {

// Element i (in elements) of fp32 / fp16 / bf16 data, widened exactly to fp32.
inline float load_f32(DType d, const void* base, int64_t i) {
  if (d == DType::kFloat32) return static_cast<const float*>(base)[i];
  const uint16_t h = static_cast<const uint16_t*>(base)[i];
  return d == DType::kFloat16 ? core::f16_to_f32(h) : core::bf16_to_f32(h);
}

// Element i of fp32 / fp16 / bf16 data set to v rounded once (to nearest even).
inline void store_rounded(DType d, void* base, int64_t i, float v) {
  if (d == DType::kFloat32) {
    static_cast<float*>(base)[i] = v;
    return;
  }
  static_cast<uint16_t*>(base)[i] = d == DType::kFloat16 ? core::f32_to_f16(v) : core::f32_to_bf16(v);
}

// out[r, c] = round(src[r * cols + c]) for a row-major fp32 matrix src, out any 2-D strides.
inline void round_matrix(const float* src, const TensorView& out, int threads) {
  const int64_t cols = out.shape[1];
  core::parallel_for(out.shape[0], threads, [&](int64_t r) {
    for (int64_t c = 0; c < cols; ++c)
      store_rounded(out.dtype, out.data, r * out.strides[0] + c * out.strides[1], src[r * cols + c]);
  });
}

}  // namespace tilegrad::ops::linear
