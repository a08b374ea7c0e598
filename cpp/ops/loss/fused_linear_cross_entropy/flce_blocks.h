// What the family's block loops (flce_engine.cpp) and gradient filtering (flce_filter*.cpp) share: a
// tensor as a GEMM operand, and rows spread over threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/gemm.h"
#include "core/parallel.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

inline core::GemmMatrix matrix_of(const TensorView& t) {
  return core::GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
}

// Runs fn(r0, r1) over [0, rows) in contiguous row ranges (about 8 per thread) handed out first
// come, first served, so a preempted thread does not hold the others up. Every row is computed
// by one call on its own, so the split never changes a result.
template <class Fn>
void for_row_tiles(int64_t rows, int threads, Fn&& fn) {
  if (rows <= 0) return;
  const int team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  if (team == 1 || core::in_parallel_region()) return fn(int64_t(0), rows);
  const int64_t per = std::max<int64_t>(1, rows / (int64_t(team) * 8));
  const int64_t tiles = (rows + per - 1) / per;
  std::atomic<int64_t> next{0};
  core::parallel_for(team, team, [&](int64_t) {
    for (int64_t tile = next.fetch_add(1); tile < tiles; tile = next.fetch_add(1))
      fn(tile * per, std::min(rows, (tile + 1) * per));
  });
}

}  // namespace tilegrad::ops
