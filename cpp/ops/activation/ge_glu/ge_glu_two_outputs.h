// The GeGLU kernels' span loop (include after one simd_<isa>.h and core/simd_map.h): two outputs
// and kIn inputs of one dtype D, n contiguous elements each; f(inputs...) returns both outputs. The
// tail runs the same vector code through zero-padded stack buffers, so every element gets identical
// math whatever its position or the thread count.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

namespace tilegrad::ops {
namespace {

struct TwoOutputs {
  simd::VF first, second;
};

template <DType D, class F, size_t... I>
TwoOutputs apply_two(const char* const* in, int64_t i, F& f, std::index_sequence<I...>) {
  return f(simd::Io<D>::load(in[I] + i * simd::kSize<D>)...);
}

template <DType D, int kIn, class F>
void map_span_two(char* const* ptrs, int64_t n, bool stream, F&& f) {
  using simd::Io;
  constexpr int64_t L = simd::kLanes, es = simd::kSize<D>;
  constexpr auto seq = std::make_index_sequence<kIn>{};
  char* out0 = ptrs[0];
  char* out1 = ptrs[1];
  const char* in[kIn];
  for (int k = 0; k < kIn; ++k) in[k] = ptrs[2 + k];
  stream = stream && L > 1 && ((reinterpret_cast<uintptr_t>(out0) | reinterpret_cast<uintptr_t>(out1)) & 63) == 0;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const TwoOutputs r = apply_two<D>(in, i, f, seq);
    if (stream) {
      Io<D>::stream(out0 + i * es, r.first);
      Io<D>::stream(out1 + i * es, r.second);
    } else {
      Io<D>::store(out0 + i * es, r.first);
      Io<D>::store(out1 + i * es, r.second);
    }
  }
  if (i < n) {
    const int64_t bytes = (n - i) * es;
    alignas(64) char buf_in[kIn][simd::kLanes * 4] = {};
    alignas(64) char buf_out[2][simd::kLanes * 4];
    const char* padded[kIn];
    for (int k = 0; k < kIn; ++k) {
      std::memcpy(buf_in[k], in[k] + i * es, bytes);
      padded[k] = buf_in[k];
    }
    const TwoOutputs r = apply_two<D>(padded, 0, f, seq);
    Io<D>::store(buf_out[0], r.first);
    Io<D>::store(buf_out[1], r.second);
    std::memcpy(out0 + i * es, buf_out[0], bytes);
    std::memcpy(out1 + i * es, buf_out[1], bytes);
  }
  if (stream) simd::stream_fence();
}

}  // namespace
}  // namespace tilegrad::ops
