// A sweep: consecutive rows of one block of a row-wise gradient (RowSplit::kShapeBlocks,
// core/row_tiling.h) handed to its kernel in one call, RowTiling::sweep_rows at a time. The kernel
// writes each row's dx, then sums the rows' parameter-gradient contributions into the block's fp32
// partials column by column over the sweep (core/param_sweep.h): each partial is loaded and stored
// once per sweep instead of once per row. Row by row, the partial rows, the parameter row and the
// row itself do not fit in L1 together, and reloading the partials cost about as much as the rest of
// the gradient. The sums are the same fp32 operations in the same row order, so no bit depends on the
// sweep size.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tilegrad::core {

struct RowSweep {
  static constexpr int64_t kMaxRows = 32;
  int64_t count = 0;
  const char* dy[kMaxRows];
  const char* x[kMaxRows];
  char* dx[kMaxRows];          // nullptr (for every row): dx not computed
  const char* extra[kMaxRows];  // a third row the kernel reads (AddRmsNorm's residual gradient), or nullptr
  float mean[kMaxRows];         // the row's mean (0 for RMSNorm: x - 0 is x exactly)
  float rstd[kMaxRows];

  // dx written over dy or x (the operators allow it): the parameter sums must read the rows first.
  bool dx_over_inputs() const {
    for (int64_t r = 0; r < count; ++r)
      if (dx[r] && (dx[r] == dy[r] || dx[r] == x[r])) return true;
    return false;
  }
};

// The sweeps of one tile of `tiling` (a RowTiling): runs of tiling.sweep_rows consecutive rows (fewer
// at the tile's end). `fill(sweep, j, r)` sets the sweep's row j from row r, then `run(sweep, r0)`.
template <class Tiling, class Fill, class Run>
void for_each_sweep(const Tiling& tiling, int64_t tile, Fill&& fill, Run&& run) {
  const int64_t end = tiling.tile_end(tile);
  for (int64_t r0 = tiling.tile_begin(tile); r0 < end; r0 += tiling.sweep_rows) {
    RowSweep sweep;
    sweep.count = std::min(tiling.sweep_rows, end - r0);
    for (int64_t j = 0; j < sweep.count; ++j) fill(sweep, j, r0 + j);
    run(sweep, r0);
  }
}

}  // namespace tilegrad::core
