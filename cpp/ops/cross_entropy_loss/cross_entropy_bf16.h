// bf16 results through AVX512-BF16's vcvtneps2bf16 where the CPU has it (checked once at run time):
// one instruction instead of the ~9 of the exact integer rounding in simd_avx512.h. The instruction
// rounds to nearest even and quiets NaN exactly like core::f32_to_bf16, but flushes subnormal fp32
// inputs to zero, so a vector holding any |v| < 2^-126 takes the exact path: the bits are the same
// as core::f32_to_bf16 for every value. Include after core/simd_avx512.h, only when __AVX512F__.
#pragma once

#include <immintrin.h>

namespace tilegrad::ops {
namespace {

inline bool cpu_has_avx512bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

#define TILEGRAD_CE_BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,fma")))

TILEGRAD_CE_BF16_TARGET inline __m256i to_bf16_fast(simd::VF v) {
  // lanes with a zero exponent field (zero or subnormal): exact path (rare; exact zeros included)
  const __mmask16 tiny = _mm512_testn_epi32_mask(_mm512_castps_si512(v.v), _mm512_set1_epi32(0x7f800000));
  if (__builtin_expect(tiny != 0, 0)) return simd::to_bf16(v);
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v.v));
}

// out[i] = f(i) for i in [0, n) as bf16, 16 at a time (n a multiple of 16); with `stream`, out must
// be 32-byte aligned. f(i) -> simd::VF.
template <class F>
TILEGRAD_CE_BF16_TARGET inline void store_bf16_run(uint16_t* out, int64_t n, bool stream, F&& f) {
  if (stream) {
    for (int64_t i = 0; i < n; i += 16) _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_fast(f(i)));
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_fast(f(i)));
  }
}

// Elements to skip so that a bf16 output at `out` reaches 64-byte alignment (-1: never, odd address).
inline int64_t bf16_head(const void* out) {
  const auto a = reinterpret_cast<uintptr_t>(out);
  if (a & 1) return -1;
  return static_cast<int64_t>(((64 - (a & 63)) & 63) / 2);
}

}  // namespace
}  // namespace tilegrad::ops
