// Lane pairs for kernels that combine element pairs of a row (the rotary position embedding):
// a Pair holds L pairs as two vectors, their first and their second elements, read from or written
// to a row where the pairs are either planar (first at p[i], second at p[i + partner]) or
// interleaved (p[2i], p[2i + 1]). Include after one simd_*.h; the (de)interleaving shuffles are
// picked by the ISA flags of the translation unit, checked against its kLanes.
//
// mul_round(a, b) is a * b rounded to fp32 on its own: the compiler may not fuse it into a
// following add or subtract (GCC contracts a * b + c into an FMA under its default
// -ffp-contract=fast when the ISA has one). So a kernel writing a * b + c * d gets the same bits on
// every ISA, and the same bits as the formula evaluated as written (PyTorch, the vendor's
// Mul / Mul / Add sequence).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/simd_map.h"

namespace tilegrad::simd {
namespace {

#if defined(__AVX512F__)
static_assert(kLanes == 16, "simd_pairs.h: include after simd_avx512.h in an AVX-512 translation unit");

// (x[0..16), x[16..32)) -> (x[0], x[2], .., x[30]), (x[1], x[3], .., x[31]).
inline void deinterleave(VF lo, VF hi, VF& even, VF& odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  even = {_mm512_permutex2var_ps(lo.v, ie, hi.v)};
  odd = {_mm512_permutex2var_ps(lo.v, io, hi.v)};
}
// The inverse: (e, o) -> (e0, o0, .., e7, o7), (e8, o8, .., e15, o15).
inline void interleave(VF even, VF odd, VF& lo, VF& hi) {
  const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  lo = {_mm512_permutex2var_ps(even.v, il, odd.v)};
  hi = {_mm512_permutex2var_ps(even.v, ih, odd.v)};
}
#elif defined(__AVX2__)
static_assert(kLanes == 8, "simd_pairs.h: include after simd_avx2.h in an AVX2 translation unit");

inline void deinterleave(VF lo, VF hi, VF& even, VF& odd) {
  // Within each 128-bit half: (lo0, lo2, hi0, hi2); then the 64-bit chunks reordered 0, 2, 1, 3.
  const __m256 e = _mm256_shuffle_ps(lo.v, hi.v, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 o = _mm256_shuffle_ps(lo.v, hi.v, _MM_SHUFFLE(3, 1, 3, 1));
  even = {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)))};
  odd = {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)))};
}
inline void interleave(VF even, VF odd, VF& lo, VF& hi) {
  const __m256 a = _mm256_unpacklo_ps(even.v, odd.v);  // e0 o0 e1 o1 | e4 o4 e5 o5
  const __m256 b = _mm256_unpackhi_ps(even.v, odd.v);  // e2 o2 e3 o3 | e6 o6 e7 o7
  lo = {_mm256_permute2f128_ps(a, b, 0x20)};
  hi = {_mm256_permute2f128_ps(a, b, 0x31)};
}
#else
static_assert(kLanes == 1, "simd_pairs.h: include after simd_scalar.h in a baseline translation unit");

// One lane: the two loads are already the pair's two elements.
inline void deinterleave(VF lo, VF hi, VF& even, VF& odd) {
  even = lo;
  odd = hi;
}
inline void interleave(VF even, VF odd, VF& lo, VF& hi) {
  lo = even;
  hi = odd;
}
#endif

inline VF mul_round(VF a, VF b) {
  VF p = a * b;
  __asm__("" : "+x"(p.v));  // opaque to the optimizer: the product is materialised, never fused
  return p;
}

struct Pair {
  VF first, second;
};

// L pairs starting at pair i of a row of dtype D at p.
template <DType D, bool Interleaved>
inline Pair load_pair(const char* p, int64_t partner, int64_t i) {
  constexpr int64_t es = kSize<D>;
  if constexpr (Interleaved) {
    Pair r;
    deinterleave(Io<D>::load(p + 2 * i * es), Io<D>::load(p + (2 * i + kLanes) * es), r.first, r.second);
    return r;
  } else {
    return {Io<D>::load(p + i * es), Io<D>::load(p + (i + partner) * es)};
  }
}

// Writes L pairs at pair i, rounded once to D; Stream: non-temporal stores (the caller guarantees
// the vector-size alignment every such store needs, and issues stream_fence() when done).
template <DType D, bool Interleaved, bool Stream = false>
inline void store_pair(char* p, int64_t partner, int64_t i, Pair v) {
  constexpr int64_t es = kSize<D>;
  const auto put = [](char* q, VF x) {
    if constexpr (Stream) Io<D>::stream(q, x);
    else Io<D>::store(q, x);
  };
  if constexpr (Interleaved) {
    VF lo, hi;
    interleave(v.first, v.second, lo, hi);
    put(p + 2 * i * es, lo);
    put(p + (2 * i + kLanes) * es, hi);
  } else {
    put(p + i * es, v.first);
    put(p + (i + partner) * es, v.second);
  }
}

// The last count < L pairs, through a zero-padded stack buffer laid out as a planar row with
// partner L (or an interleaved one), so they get the same vector code as every other pair.
template <DType D, bool Interleaved>
inline Pair load_pair_tail(const char* p, int64_t partner, int64_t i, int64_t count) {
  constexpr int64_t es = kSize<D>;
  alignas(64) char buf[2 * kLanes * 4] = {};
  if constexpr (Interleaved) {
    std::memcpy(buf, p + 2 * i * es, 2 * count * es);
  } else {
    std::memcpy(buf, p + i * es, count * es);
    std::memcpy(buf + kLanes * es, p + (i + partner) * es, count * es);
  }
  return load_pair<D, Interleaved>(buf, kLanes, 0);
}

template <DType D, bool Interleaved>
inline void store_pair_tail(char* p, int64_t partner, int64_t i, int64_t count, Pair v) {
  constexpr int64_t es = kSize<D>;
  alignas(64) char buf[2 * kLanes * 4];
  store_pair<D, Interleaved>(buf, kLanes, 0, v);
  if constexpr (Interleaved) {
    std::memcpy(p + 2 * i * es, buf, 2 * count * es);
  } else {
    std::memcpy(p + i * es, buf, count * es);
    std::memcpy(p + (i + partner) * es, buf + kLanes * es, count * es);
  }
}

}  // namespace
}  // namespace tilegrad::simd
