// Cross-entropy forward tiling: a pure function of (N, C), the input/output element sizes, the
// layout and the Platform. Rows are split over threads (tile t: rows [t * rows_per_tile, ...));
// each row's max / sum-of-exp passes run over chunks of chunk_cols columns that stay in L2, merged
// in chunk order, so a row longer than the cache is never read from memory more than twice.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct CrossEntropyLossTiling {
  int64_t rows = 0, cols = 0;
  int num_tiles = 0;
  int64_t rows_per_tile = 0;
  int64_t chunk_cols = 0;         // columns per statistics chunk (multiple of 64 unless it is the whole row)
  int64_t num_chunks = 0;         // chunks per row
  bool streaming_stores = false;  // logProb bypasses the caches (non-temporal stores)
  Isa isa = Isa::kScalar;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API CrossEntropyLossTiling cross_entropy_loss_tiling(int64_t rows, int64_t cols, int64_t in_elem_bytes,
                                                              int64_t out_elem_bytes, bool out_contiguous,
                                                              const core::Platform& platform);

}  // namespace tilegrad::ops
