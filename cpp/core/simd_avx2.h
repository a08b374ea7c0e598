// 8 x float with AVX2 + FMA + F16C. Include only from a translation unit built with those flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tilegrad::simd {
namespace {

struct VF { __m256 v; };
struct VI { __m256i v; };
struct Mask { __m256 v; };
constexpr int kLanes = 8;

inline VF set1(float x) { return {_mm256_set1_ps(x)}; }
inline VI set1i(int32_t x) { return {_mm256_set1_epi32(x)}; }
inline VF operator+(VF a, VF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VF operator-(VF a, VF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VF operator*(VF a, VF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VF operator/(VF a, VF b) { return {_mm256_div_ps(a.v, b.v)}; }
inline VF fma(VF a, VF b, VF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VF min_nan_x(VF bound, VF x) { return {_mm256_min_ps(bound.v, x.v)}; }
inline VF max_nan_x(VF bound, VF x) { return {_mm256_max_ps(bound.v, x.v)}; }
inline VF abs(VF a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline VF neg(VF a) { return {_mm256_xor_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline VF round_nearest(VF a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
// a * 2^n for integral n in [-150, 128]: two exact power-of-two multiplies keep subnormal results.
inline VF scale2(VF a, VF n) {
  const __m256i ni = _mm256_cvtps_epi32(n.v);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, _mm256_set1_epi32(127)), 23));
  return {_mm256_mul_ps(_mm256_mul_ps(a.v, p1), p2)};
}
// 1/a for a in [1, 2]: the 12-bit approximation + two Newton steps (one step leaves ~1 ulp of
// error, e.g. recip(1) = 0.99999994, so sigmoid(1e4) != 1 and silu_backward(dy, 1e4) != dy).
inline VF sqrt(VF a) { return {_mm256_sqrt_ps(a.v)}; }  // correctly rounded (IEEE)
inline VF recip(VF a) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 r = _mm256_rcp_ps(a.v);
  __m256 e = _mm256_fnmadd_ps(a.v, r, one);
  r = _mm256_fmadd_ps(r, e, r);
  e = _mm256_fnmadd_ps(a.v, r, one);
  return {_mm256_fmadd_ps(r, e, r)};
}
inline Mask lt(VF a, VF b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline Mask ge(VF a, VF b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ)}; }
inline Mask eq(VF a, VF b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ)}; }
inline Mask isnan(VF a) { return {_mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q)}; }
inline Mask mask_or(Mask a, Mask b) { return {_mm256_or_ps(a.v, b.v)}; }
inline VF select(Mask m, VF a, VF b) { return {_mm256_blendv_ps(b.v, a.v, m.v)}; }
inline VI as_int(VF a) { return {_mm256_castps_si256(a.v)}; }
inline VF as_float(VI a) { return {_mm256_castsi256_ps(a.v)}; }
inline VI operator+(VI a, VI b) { return {_mm256_add_epi32(a.v, b.v)}; }
inline VI operator-(VI a, VI b) { return {_mm256_sub_epi32(a.v, b.v)}; }
inline VI operator&(VI a, VI b) { return {_mm256_and_si256(a.v, b.v)}; }
inline VI sra(VI a, int n) { return {_mm256_srai_epi32(a.v, n)}; }
inline VI sll(VI a, int n) { return {_mm256_slli_epi32(a.v, n)}; }
inline VF to_float(VI a) { return {_mm256_cvtepi32_ps(a.v)}; }

inline VF load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, VF a) { _mm256_storeu_ps(p, a.v); }
inline void stream(float* p, VF a) { _mm256_stream_ps(p, a.v); }
// Orders non-temporal stores before anything that follows (end of a streaming loop).
inline void stream_fence() { _mm_sfence(); }
inline VF load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
}
// Round to nearest even, NaN quieted; same bits as core::f32_to_bf16.
inline __m128i to_bf16(VF a) {
  const __m256i u = _mm256_castps_si256(a.v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet),
                                                         _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q)));
  // r holds 16-bit values in 32-bit lanes: pack without saturation surprises (values < 65536).
  const __m256i packed = _mm256_packus_epi32(r, r);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}
inline void store_bf16(uint16_t* p, VF a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16(a)); }
inline void stream_bf16(uint16_t* p, VF a) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), to_bf16(a)); }
inline VF load_f16(const uint16_t* p) { return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
inline void store_f16(uint16_t* p, VF a) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void stream_f16(uint16_t* p, VF a) {
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline float reduce_add(VF a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline VF max(VF a, VF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline float reduce_max(VF a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace tilegrad::simd
