// The portable "vector" of one float: same interface as simd_avx2.h / simd_avx512.h, so the
// generic algorithms in vmath.h compile identically for every ISA.
#pragma once

#include <cmath>
#include <cstring>
#include <cstdint>

#include "core/dtype.h"

namespace tilegrad::simd {
namespace {

struct VF { float v; };
struct VI { int32_t v; };
using Mask = bool;
constexpr int kLanes = 1;

inline VF set1(float x) { return {x}; }
inline VI set1i(int32_t x) { return {x}; }
inline VF operator+(VF a, VF b) { return {a.v + b.v}; }
inline VF operator-(VF a, VF b) { return {a.v - b.v}; }
inline VF operator*(VF a, VF b) { return {a.v * b.v}; }
inline VF operator/(VF a, VF b) { return {a.v / b.v}; }
inline VF fma(VF a, VF b, VF c) { return {std::fma(a.v, b.v, c.v)}; }
// min/max return x when x is NaN (x is the second operand, as in the SSE/AVX instructions).
inline VF min_nan_x(VF bound, VF x) { return {x.v < bound.v || std::isnan(x.v) ? x.v : bound.v}; }
inline VF max_nan_x(VF bound, VF x) { return {x.v > bound.v || std::isnan(x.v) ? x.v : bound.v}; }
inline VF abs(VF a) { return {std::fabs(a.v)}; }
inline VF neg(VF a) { return {-a.v}; }
inline VF round_nearest(VF a) { return {std::nearbyint(a.v)}; }
// a * 2^n for integral n in [-150, 128] (exact scaling, subnormal and overflow results correct).
inline VF scale2(VF a, VF n) { return {std::ldexp(a.v, static_cast<int>(n.v))}; }
inline VF sqrt(VF a) { return {std::sqrt(a.v)}; }  // correctly rounded (IEEE)
inline VF recip(VF a) { return {1.0f / a.v}; }
inline Mask lt(VF a, VF b) { return a.v < b.v; }
inline Mask ge(VF a, VF b) { return a.v >= b.v; }
inline Mask eq(VF a, VF b) { return a.v == b.v; }
inline Mask isnan(VF a) { return std::isnan(a.v); }
inline Mask mask_or(Mask a, Mask b) { return a || b; }
inline VF select(Mask m, VF a, VF b) { return m ? a : b; }  // m ? a : b
inline VI as_int(VF a) { return {static_cast<int32_t>(core::f32_bits(a.v))}; }
inline VF as_float(VI a) { return {core::f32_from_bits(static_cast<uint32_t>(a.v))}; }
inline VI operator+(VI a, VI b) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) + static_cast<uint32_t>(b.v))}; }
inline VI operator-(VI a, VI b) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) - static_cast<uint32_t>(b.v))}; }
inline VI operator&(VI a, VI b) { return {a.v & b.v}; }
inline VI sra(VI a, int n) { return {a.v >> n}; }
inline VI sll(VI a, int n) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) << n)}; }
inline VF to_float(VI a) { return {static_cast<float>(a.v)}; }

// Loads and stores go through memcpy: data need not be aligned to its element size (NumPy views
// into byte buffers, aclTensors at odd addresses); dereferencing a misaligned float* is UB.
template <class T>
inline T load_raw(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store_raw(void* p, T v) { std::memcpy(p, &v, sizeof v); }
inline VF load(const float* p) { return {load_raw<float>(p)}; }
inline void store(float* p, VF a) { store_raw(p, a.v); }
inline void stream(float* p, VF a) { store_raw(p, a.v); }
inline void stream_fence() {}
inline VF load_bf16(const uint16_t* p) { return {core::bf16_to_f32(load_raw<uint16_t>(p))}; }
inline void store_bf16(uint16_t* p, VF a) { store_raw(p, core::f32_to_bf16(a.v)); }
inline void stream_bf16(uint16_t* p, VF a) { store_bf16(p, a); }
inline VF load_f16(const uint16_t* p) { return {core::f16_to_f32(load_raw<uint16_t>(p))}; }
inline void store_f16(uint16_t* p, VF a) { store_raw(p, core::f32_to_f16(a.v)); }
inline void stream_f16(uint16_t* p, VF a) { store_f16(p, a); }
inline float reduce_add(VF a) { return a.v; }
inline float reduce_max(VF a) { return a.v; }
inline VF max(VF a, VF b) { return {a.v > b.v ? a.v : b.v}; }

}  // namespace
}  // namespace tilegrad::simd
