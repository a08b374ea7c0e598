// Typed loads/stores and the span loop shared by elementwise kernels. Include after one simd_*.h.
// map_span applies f to n contiguous elements of the inputs and writes the output, with the same
// vector code for the tail (through a padded stack buffer) so every element gets identical math.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::simd {
namespace {

template <DType D>
struct Io;
template <>
struct Io<DType::kFloat32> {
  using T = float;
  static VF load(const char* p) { return simd::load(reinterpret_cast<const float*>(p)); }
  static void store(char* p, VF v) { simd::store(reinterpret_cast<float*>(p), v); }
  static void stream(char* p, VF v) { simd::stream(reinterpret_cast<float*>(p), v); }
};
template <>
struct Io<DType::kFloat16> {
  using T = uint16_t;
  static VF load(const char* p) { return load_f16(reinterpret_cast<const uint16_t*>(p)); }
  static void store(char* p, VF v) { store_f16(reinterpret_cast<uint16_t*>(p), v); }
  static void stream(char* p, VF v) { stream_f16(reinterpret_cast<uint16_t*>(p), v); }
};
template <>
struct Io<DType::kBFloat16> {
  using T = uint16_t;
  static VF load(const char* p) { return load_bf16(reinterpret_cast<const uint16_t*>(p)); }
  static void store(char* p, VF v) { store_bf16(reinterpret_cast<uint16_t*>(p), v); }
  static void stream(char* p, VF v) { stream_bf16(reinterpret_cast<uint16_t*>(p), v); }
};

template <DType D>
constexpr int64_t kSize = sizeof(typename Io<D>::T);

// A partial vector of `count` < lanes elements at p, loaded through / stored back through a zero-padded
// buffer, so a row's tail runs the same vector code as its body.
template <DType D>
inline VF load_partial(const char* p, int64_t count) {
  alignas(64) char buf[kLanes * 4] = {};
  std::memcpy(buf, p, count * kSize<D>);
  return Io<D>::load(buf);
}

template <DType D>
inline void store_partial(char* p, VF v, int64_t count) {
  alignas(64) char buf[kLanes * 4];
  Io<D>::store(buf, v);
  std::memcpy(p, buf, count * kSize<D>);
}

// Elements [i, i + count) of a row of D: a full vector when count == kLanes, else zero-padded.
template <DType D>
inline VF load_n(const char* row, int64_t i, int64_t count) {
  const char* p = row + i * kSize<D>;
  return count == kLanes ? Io<D>::load(p) : load_partial<D>(p, count);
}

inline VF load_n(const float* row, int64_t i, int64_t count) {
  return load_n<DType::kFloat32>(reinterpret_cast<const char*>(row), i, count);
}

// Stores elements [i, i + count) of an fp32 row (count <= kLanes).
inline void store_n(float* row, int64_t i, int64_t count, VF v) {
  if (count == kLanes) store(row + i, v);
  else store_partial<DType::kFloat32>(reinterpret_cast<char*>(row + i), v, count);
}

template <DType D>
inline void store_or_stream(char* p, VF v, bool stream) {
  if (stream) Io<D>::stream(p, v);
  else Io<D>::store(p, v);
}

// One full vector at element i: out[i..i+L) = f(in...[i..i+L)).
template <DType DOut, DType... DIn, class F, size_t... I>
inline VF apply_at(const char* const* in, int64_t i, F& f, std::index_sequence<I...>) {
  return f(Io<DIn>::load(in[I] + i * kSize<DIn>)...);
}

// A partial vector of `count` < lanes elements at `at`: inputs padded through stack buffers.
template <DType DOut, DType... DIn, class F, size_t... I>
void apply_partial(char* out, const char* const* in, int64_t at, int64_t count, F& f, std::index_sequence<I...> seq) {
  alignas(64) char buf_in[sizeof...(DIn)][kLanes * 4] = {};
  alignas(64) char buf_out[kLanes * 4];
  const char* padded[sizeof...(DIn)];
  for (size_t k = 0; k < sizeof...(DIn); ++k) padded[k] = buf_in[k];
  int64_t sizes[] = {kSize<DIn>...};
  for (size_t k = 0; k < sizeof...(DIn); ++k) std::memcpy(buf_in[k], in[k] + at * sizes[k], count * sizes[k]);
  Io<DOut>::store(buf_out, apply_at<DOut, DIn...>(padded, 0, f, seq));
  std::memcpy(out + at * kSize<DOut>, buf_out, count * kSize<DOut>);
}

// f(VF in...) -> VF over n contiguous elements; ptrs[0] is the output, ptrs[1..] the inputs. With
// `stream`, the output is written with non-temporal stores once it is 64-byte aligned.
template <DType DOut, DType... DIn, class F>
void map_span(char* const* ptrs, int64_t n, bool stream, F&& f) {
  constexpr int64_t L = kLanes;
  constexpr int64_t es = kSize<DOut>;
  const auto seq = std::index_sequence_for<decltype(DIn)...>{};
  char* out = ptrs[0];
  // Local copies: stores through `out` (char*) could otherwise alias the caller's pointer array and
  // force a reload of every input pointer on each iteration.
  const char* in[sizeof...(DIn)];
  for (size_t k = 0; k < sizeof...(DIn); ++k) in[k] = ptrs[k + 1];
  int64_t i = 0;
  if (stream && L > 1) {
    const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(out) & 63);
    int64_t head = misalign == 0 ? 0 : (misalign % es ? n : (64 - misalign) / es);  // unalignable: no streaming
    head = head < n ? head : n;
    for (; i < head; i += L) apply_partial<DOut, DIn...>(out, in, i, (head - i) < L ? (head - i) : L, f, seq);
    i = head;
    for (; i + L <= n; i += L) Io<DOut>::stream(out + i * es, apply_at<DOut, DIn...>(in, i, f, seq));
    stream_fence();
  } else {
    for (; i + L <= n; i += L) Io<DOut>::store(out + i * es, apply_at<DOut, DIn...>(in, i, f, seq));
  }
  if (i < n) apply_partial<DOut, DIn...>(out, in, i, n - i, f, seq);
}

}  // namespace
}  // namespace tilegrad::simd
