// The parameter gradients' partials of a core::RowSweep (core/row_sweep.h), shared by the norm
// gradients (RMSNorm's dgamma; LayerNorm's dweight and dbias). Include after one core/simd_<isa>.h
// and core/simd_map.h. With xhat = (x - mean) * rstd per row:
//
//   pw_j += dy_j * xhat_j      (one fma per row, the rows in order)
//   pb_j += dy_j               (kBias: LayerNorm's dbias)
//
// sweep_param_sums runs column block by column block over the sweep's rows (found in L2 after their
// dx pass); row_param_sums runs one row from memory (a gradient without dx). Both give each partial
// the same operations in the same row order, so their bits agree.
#pragma once

#include <cstdint>

#include "core/row_sweep.h"

namespace tilegrad::simd {
namespace {

// V adjacent column vectors from column i (count elements each: kLanes, or fewer in the row's tail),
// summed over the sweep's rows in registers (V chains hide the fma latency). Padded lanes: dy = 0
// there, so both sums add 0, and they are not stored.
template <DType D, int V, bool kBias>
void sweep_param_columns(const core::RowSweep& s, float* pw, float* pb, int64_t i, int64_t count) {
  VF sw[V], sb[V];
  for (int v = 0; v < V; ++v) {
    sw[v] = load_n(pw, i + v * kLanes, count);
    if constexpr (kBias) sb[v] = load_n(pb, i + v * kLanes, count);
  }
  for (int64_t r = 0; r < s.count; ++r) {
    const VF m = set1(s.mean[r]), rs = set1(s.rstd[r]);
    for (int v = 0; v < V; ++v) {
      const VF d = load_n<D>(s.dy[r], i + v * kLanes, count);
      sw[v] = fma(d, (load_n<D>(s.x[r], i + v * kLanes, count) - m) * rs, sw[v]);
      if constexpr (kBias) sb[v] = sb[v] + d;
    }
  }
  for (int v = 0; v < V; ++v) {
    store_n(pw, i + v * kLanes, count, sw[v]);
    if constexpr (kBias) store_n(pb, i + v * kLanes, count, sb[v]);
  }
}

template <DType D, bool kBias>
void sweep_param_sums(const core::RowSweep& s, float* pw, float* pb, int64_t n) {
  constexpr int64_t L = kLanes;
  int64_t i = 0;
  for (; i + 8 * L <= n; i += 8 * L) sweep_param_columns<D, 8, kBias>(s, pw, pb, i, L);
  for (; i + L <= n; i += L) sweep_param_columns<D, 1, kBias>(s, pw, pb, i, L);
  if (i < n) sweep_param_columns<D, 1, kBias>(s, pw, pb, i, n - i);
}

// One row read once from memory, its contributions added into the partials.
template <DType D, bool kBias>
void row_param_sums(const char* dy, const char* x, float mean, float rstd, float* pw, float* pb, int64_t n) {
  const VF m = set1(mean), r = set1(rstd);
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t k = n - i < kLanes ? n - i : kLanes;
    const VF d = load_n<D>(dy, i, k);
    store_n(pw, i, k, fma(d, (load_n<D>(x, i, k) - m) * r, load_n(pw, i, k)));
    if constexpr (kBias) store_n(pb, i, k, load_n(pb, i, k) + d);
  }
}

}  // namespace
}  // namespace tilegrad::simd
