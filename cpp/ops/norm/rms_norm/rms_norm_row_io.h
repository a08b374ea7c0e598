// Row helpers of the RMSNorm family kernels (include after one core/simd_<isa>.h and core/simd_map.h):
// a partial vector loaded through a zero-padded buffer, and stored back through one, so a row's tail
// runs the same vector code as its body.
#pragma once

#include <cstdint>
#include <cstring>

namespace tilegrad::ops {
namespace {

using namespace tilegrad::simd;

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

template <DType D>
inline void store_or_stream(char* p, VF v, bool stream) {
  if (stream) Io<D>::stream(p, v);
  else Io<D>::store(p, v);
}

}  // namespace
}  // namespace tilegrad::ops
