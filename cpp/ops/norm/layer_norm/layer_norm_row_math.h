// Row arithmetic shared by the LayerNorm kernels (forward and backward; include after one
// core/simd_<isa>.h and core/simd_map.h).
#pragma once

#include <cstdint>

namespace tilegrad::ops {
namespace {

using namespace tilegrad::simd;

// sum_j f(v_j) in fp32, v = x (centre = 0) or x - mean, with four vector accumulators in a fixed order
// (a function of n alone, never of the thread count). `add(v, acc)` accumulates one vector; the
// tail's padded lanes are exactly zero (the centre is loaded partially too, so x - centre is 0 there).
template <DType D, class Add>
float row_sum(const char* x, int64_t n, float centre, Add&& add) {
  constexpr int64_t L = kLanes, es = kSize<D>;
  const VF c = set1(centre);
  VF a0 = set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = add(Io<D>::load(x + i * es) - c, a0);
    a1 = add(Io<D>::load(x + (i + L) * es) - c, a1);
    a2 = add(Io<D>::load(x + (i + 2 * L) * es) - c, a2);
    a3 = add(Io<D>::load(x + (i + 3 * L) * es) - c, a3);
  }
  for (; i + L <= n; i += L) a0 = add(Io<D>::load(x + i * es) - c, a0);
  if (i < n) {
    float centres[kLanes];
    for (int64_t j = 0; j < L; ++j) centres[j] = centre;
    const VF cp = load_partial<DType::kFloat32>(reinterpret_cast<const char*>(centres), n - i);
    a1 = add(load_partial<D>(x + i * es, n - i) - cp, a1);
  }
  return reduce_add((a0 + a1) + (a2 + a3));
}

// The row's mean and rstd: two passes over the row (the mean, then the centred squares), so a row
// with a large mean keeps its variance's digits (one pass of E[x^2] - E[x]^2 would cancel them).
template <DType D>
void row_stats(const char* x, int64_t n, float eps, float inv_n, float* mean, float* rstd) {
  const float m = row_sum<D>(x, n, 0.0f, [](VF v, VF acc) { return acc + v; }) * inv_n;
  const float ss = row_sum<D>(x, n, m, [](VF v, VF acc) { return fma(v, v, acc); });
  *mean = m;
  *rstd = 1.0f / std::sqrt(ss * inv_n + eps);
}

}  // namespace
}  // namespace tilegrad::ops
