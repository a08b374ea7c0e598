// bf16 results in pairs of vectors through AVX512-BF16 (vcvtne2ps2bf16: two conversions in one
// instruction) where the CPU has it. Single vectors use to_bf16 (core/simd_avx512.h), which
// already takes vcvtneps2bf16 when it can. Both instructions round to nearest even and quiet NaN
// exactly like core::f32_to_bf16 but flush subnormal inputs to zero, so any vector holding a
// subnormal takes the exact path: the bits equal core::f32_to_bf16 for every value.
// Include after core/simd_avx512.h, only when __AVX512F__.
#pragma once

#include <immintrin.h>

namespace tilegrad::simd {
namespace {

inline bool cpu_has_avx512bf16() { return kCpuHasBf16Convert; }

#define TILEGRAD_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,fma")))

inline __m256i to_bf16_fast(VF v) { return to_bf16(v); }

// out[i] = f(i) for i in [0, n) as bf16, 16 at a time (n a multiple of 16); with `stream`, out must
// be 32-byte aligned. f(i) -> VF.
template <class F>
TILEGRAD_BF16_TARGET inline void store_bf16_run(uint16_t* out, int64_t n, bool stream, F&& f) {
  if (stream) {
    for (int64_t i = 0; i < n; i += 16) _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_fast(f(i)));
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_fast(f(i)));
  }
}

// out[i] = f(x_i) for bf16 x and i in [0, n), n a multiple of 32: one 64-byte load holds 32 inputs,
// split into even elements (shift) and odd ones (mask), f runs on each half, vcvtne2ps2bf16 packs both
// and vpermw interleaves them back: per 32 elements 1 load, 1 conversion and 1 store instead of 2 + 2 + 2.
// A vector with a subnormal result takes the exact conversion. With `stream`, out must be 64-byte aligned.
template <class F>
TILEGRAD_BF16_TARGET inline void map_bf16_pairs(const uint16_t* in, uint16_t* out, int64_t n, bool stream, F&& f) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                          8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  for (int64_t i = 0; i < n; i += 32) {
    const __m512i v = _mm512_loadu_si512(in + i);
    const VF re = f(VF{_mm512_castsi512_ps(_mm512_slli_epi32(v, 16))});
    const VF ro = f(VF{_mm512_castsi512_ps(_mm512_and_si512(v, high))});
    __m512i packed;
    if (__builtin_expect((_mm512_fpclass_ps_mask(re.v, 0x20) | _mm512_fpclass_ps_mask(ro.v, 0x20)) != 0, 0))
      packed = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(re)), to_bf16(ro), 1);
    else
      packed = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(ro.v, re.v));
    const __m512i words = _mm512_permutexvar_epi16(idx, packed);
    if (stream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), words);
    else
      _mm512_storeu_si512(out + i, words);
  }
  if (stream) _mm_sfence();
}

// Elements to skip so that a bf16 output at `out` reaches 64-byte alignment (-1: never, odd address).
inline int64_t bf16_head(const void* out) {
  const auto a = reinterpret_cast<uintptr_t>(out);
  if (a & 1) return -1;
  return static_cast<int64_t>(((64 - (a & 63)) & 63) / 2);
}

}  // namespace
}  // namespace tilegrad::simd
