// 16 x float with AVX-512 F/BW/VL/DQ (+F16C). Include only from a translation unit built with those flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tilegrad::simd {
namespace {

struct VF { __m512 v; };
struct VI { __m512i v; };
struct Mask { __mmask16 v; };
constexpr int kLanes = 16;

inline VF set1(float x) { return {_mm512_set1_ps(x)}; }
inline VI set1i(int32_t x) { return {_mm512_set1_epi32(x)}; }
inline VF operator+(VF a, VF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VF operator-(VF a, VF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VF operator*(VF a, VF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VF operator/(VF a, VF b) { return {_mm512_div_ps(a.v, b.v)}; }
inline VF fma(VF a, VF b, VF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline VF min_nan_x(VF bound, VF x) { return {_mm512_min_ps(bound.v, x.v)}; }
inline VF max_nan_x(VF bound, VF x) { return {_mm512_max_ps(bound.v, x.v)}; }
inline VF abs(VF a) { return {_mm512_abs_ps(a.v)}; }
inline VF neg(VF a) { return {_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(int32_t(0x80000000u))))}; }
inline VF round_nearest(VF a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline VF scale2(VF a, VF n) { return {_mm512_scalef_ps(a.v, n.v)}; }
inline VF sqrt(VF a) { return {_mm512_sqrt_ps(a.v)}; }  // correctly rounded (IEEE)
inline VF recip(VF a) {
  const __m512 r = _mm512_rcp14_ps(a.v);
  const __m512 e = _mm512_fnmadd_ps(a.v, r, _mm512_set1_ps(1.0f));
  return {_mm512_fmadd_ps(r, e, r)};
}
inline Mask lt(VF a, VF b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline Mask ge(VF a, VF b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ)}; }
inline Mask eq(VF a, VF b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ)}; }
inline Mask isnan(VF a) { return {_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q)}; }
inline Mask mask_or(Mask a, Mask b) { return {static_cast<__mmask16>(a.v | b.v)}; }
inline VF select(Mask m, VF a, VF b) { return {_mm512_mask_blend_ps(m.v, b.v, a.v)}; }
inline VI as_int(VF a) { return {_mm512_castps_si512(a.v)}; }
inline VF as_float(VI a) { return {_mm512_castsi512_ps(a.v)}; }
inline VI operator+(VI a, VI b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VI operator-(VI a, VI b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VI operator&(VI a, VI b) { return {_mm512_and_si512(a.v, b.v)}; }
inline VI sra(VI a, int n) { return {_mm512_srai_epi32(a.v, n)}; }
inline VI sll(VI a, int n) { return {_mm512_slli_epi32(a.v, n)}; }
inline VF to_float(VI a) { return {_mm512_cvtepi32_ps(a.v)}; }

inline VF load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void store(float* p, VF a) { _mm512_storeu_ps(p, a.v); }
inline void stream(float* p, VF a) { _mm512_stream_ps(p, a.v); }
// Orders non-temporal stores before anything that follows (end of a streaming loop).
inline void stream_fence() { _mm_sfence(); }
inline VF load_bf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
}
// Round to nearest even, NaN quieted; same bits as core::f32_to_bf16, by integer arithmetic.
inline __m256i to_bf16_exact(VF a) {
  const __m512i u = _mm512_castps_si512(a.v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __m512i r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q), rounded, quiet);
  return _mm512_cvtepi32_epi16(r);
}

// AVX512-BF16's vcvtneps2bf16 gives the same bits in one instruction (checked exhaustively on random
// inputs) except for subnormal inputs, which it flushes to zero; those vectors take the exact path.
const bool kCpuHasBf16Convert = (__builtin_cpu_init(), __builtin_cpu_supports("avx512bf16"));

inline __m256i to_bf16(VF a) {
  if (kCpuHasBf16Convert && _mm512_fpclass_ps_mask(a.v, 0x20 /* subnormal */) == 0)
    return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(a.v));
  return to_bf16_exact(a);
}
inline void store_bf16(uint16_t* p, VF a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16(a)); }
inline void stream_bf16(uint16_t* p, VF a) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bf16(a)); }
inline VF load_f16(const uint16_t* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
inline void store_f16(uint16_t* p, VF a) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void stream_f16(uint16_t* p, VF a) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline float reduce_add(VF a) { return _mm512_reduce_add_ps(a.v); }
inline VF max(VF a, VF b) { return {_mm512_max_ps(a.v, b.v)}; }
inline float reduce_max(VF a) { return _mm512_reduce_max_ps(a.v); }

}  // namespace
}  // namespace tilegrad::simd
