// Row arithmetic of the RMSNorm forward kernels, shared by the RMSNorm and AddRmsNorm families
// (aclnnRmsNorm, aclnnAddRmsNorm; include after one core/simd_<isa>.h). Both operators sum the squares
// and scale the row through these functions, so AddRmsNorm's y is bit for bit RmsNorm's y of its xOut.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/simd_map.h"

namespace tilegrad::simd {
namespace {

// sum_j v_j^2 in fp32 with four vector accumulators in a fixed order (a function of n alone).
// `full(i)` yields the L elements from i, `part(i, count)` the last count < L (zero-padded): the
// caller decides where the values come from (a row in memory, or a sum computed on the fly).
template <class Full, class Part>
float sum_squares(Full&& full, Part&& part, int64_t n) {
  constexpr int64_t L = kLanes;
  VF a0 = set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    const VF v0 = full(i), v1 = full(i + L), v2 = full(i + 2 * L), v3 = full(i + 3 * L);
    a0 = fma(v0, v0, a0);
    a1 = fma(v1, v1, a1);
    a2 = fma(v2, v2, a2);
    a3 = fma(v3, v3, a3);
  }
  for (; i + L <= n; i += L) {
    const VF v = full(i);
    a0 = fma(v, v, a0);
  }
  if (i < n) {
    const VF v = part(i, n - i);
    a1 = fma(v, v, a1);
  }
  return reduce_add((a0 + a1) + (a2 + a3));
}

// rstd = 1 / sqrt(s * (1/N) + eps): the vendor multiplies by the fp32 1/N, never divides.
inline float rstd_of(float sum_sq, float eps, float inv_n) { return 1.0f / std::sqrt(sum_sq * inv_n + eps); }

// y_j = round((x_j * rstd) * gamma_j): one rounding, as the vendor (not Llama's two).
template <DType D>
void scale_row(const char* x, const float* g, char* y, int64_t n, float rstd, bool stream) {
  constexpr int64_t L = kLanes, es = kSize<D>;
  const VF r = set1(rstd);
  stream = stream && L > 1 && (reinterpret_cast<uintptr_t>(y) & 63) == 0;
  int64_t i = 0;
  for (; i + L <= n; i += L) store_or_stream<D>(y + i * es, (Io<D>::load(x + i * es) * r) * load(g + i), stream);
  if (i < n) {
    const VF gv = load_partial<DType::kFloat32>(reinterpret_cast<const char*>(g + i), n - i);
    store_partial<D>(y + i * es, (load_partial<D>(x + i * es, n - i) * r) * gv, n - i);
  }
  if (stream) stream_fence();
}

}  // namespace
}  // namespace tilegrad::simd
