// The span loop of elementwise kernels with two outputs (include after one simd_<isa>.h and
// core/simd_map.h): two outputs and kIn inputs of one dtype D, n contiguous elements each; f(inputs...)
// returns both outputs. The tail runs the same vector code through zero-padded stack buffers, so
// every element gets identical math whatever its position or the thread count. (SwiGLU's and GeGLU's
// backward, GeGLU's forward with its outGelu.)
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

namespace tilegrad::simd {
namespace {

struct TwoOutputs {
  VF first, second;
};

template <DType D, class F, size_t... I>
TwoOutputs apply_two(const char* const* in, int64_t i, F& f, std::index_sequence<I...>) {
  return f(Io<D>::load(in[I] + i * kSize<D>)...);
}

// ptrs = {out0, out1, in0, ..., in(kIn-1)}. With `stream`, both outputs are written with
// non-temporal stores when both are 64-byte aligned.
template <DType D, int kIn, class F>
void map_span_two(char* const* ptrs, int64_t n, bool stream, F&& f) {
  constexpr int64_t L = kLanes, es = kSize<D>;
  constexpr auto seq = std::make_index_sequence<kIn>{};
  char* out0 = ptrs[0];
  char* out1 = ptrs[1];
  const char* in[kIn];
  for (int k = 0; k < kIn; ++k) in[k] = ptrs[2 + k];
  stream = stream && L > 1 && ((reinterpret_cast<uintptr_t>(out0) | reinterpret_cast<uintptr_t>(out1)) & 63) == 0;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const TwoOutputs r = apply_two<D>(in, i, f, seq);
    store_or_stream<D>(out0 + i * es, r.first, stream);
    store_or_stream<D>(out1 + i * es, r.second, stream);
  }
  if (i < n) {
    const int64_t bytes = (n - i) * es;
    alignas(64) char buf_in[kIn][kLanes * 4] = {};
    alignas(64) char buf_out[2][kLanes * 4];
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
  if (stream) stream_fence();
}

}  // namespace
}  // namespace tilegrad::simd
