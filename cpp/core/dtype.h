// fp16 / bf16 <-> fp32 conversion: round-to-nearest-even, NaN preserved (quieted), subnormals kept.
// Portable bit manipulation, identical in every ISA's translation unit. Internal linkage (anonymous
// namespace) so that copies compiled with different -m flags are never merged by the linker.
#pragma once

#include <cstdint>
#include <cstring>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {
namespace {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: value = mant * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return f32_from_bits(sign | f32_bits(magnitude));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a >= 0x38800000u) {                                              // normal in fp16
    const uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal or zero in fp16: scale into integer units of 2^-24, round to nearest even.
  const float scaled = f32_from_bits(a) * 16777216.0f;  // exact: multiply by 2^24
  const uint32_t whole = static_cast<uint32_t>(scaled);
  const float frac = scaled - static_cast<float>(whole);
  uint32_t m = whole;
  if (frac > 0.5f || (frac == 0.5f && (whole & 1u))) ++m;
  return static_cast<uint16_t>(sign | m);
}

// One floating-point element (float32, float16, bfloat16 or float64) of dtype d at p, widened exactly
// to double; p need not be aligned. Other dtypes are the caller's error (validated before).
inline double load_float_element(DType d, const void* p) {
  switch (d) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFloat64: {
      double f;
      std::memcpy(&f, p, 8);
      return f;
    }
    default: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return d == DType::kFloat16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
}

}  // namespace
}  // namespace tilegrad::core
