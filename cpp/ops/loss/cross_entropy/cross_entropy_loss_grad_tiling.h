// Cross-entropy gradient tiling: a pure function of (N, C), the bytes one element moves, the output
// layout and the Platform. Tile t covers rows [row_block * rows_per_tile, ...) x columns
// [col_chunk * chunk_cols, ...) with row_block = t / col_chunks, col_chunk = t % col_chunks.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct CrossEntropyLossGradTiling {
  int64_t rows = 0, cols = 0;
  int num_tiles = 0;
  int64_t rows_per_tile = 0;
  int64_t col_chunks = 1;        // > 1 only when there are fewer rows than threads
  int64_t chunk_cols = 0;        // multiple of 64 unless it covers the whole row
  bool streaming_stores = false; // xGrad bypasses the caches (non-temporal stores)
  Isa isa = Isa::kScalar;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API CrossEntropyLossGradTiling cross_entropy_loss_grad_tiling(int64_t rows, int64_t cols,
                                                                       int64_t bytes_per_elem, bool out_contiguous,
                                                                       const core::Platform& platform);

}  // namespace tilegrad::ops
