// aclnnRmsNorm tiling: a pure function of the row count and length, the element size, the operands'
// layouts and the Platform. Rows are split into equal consecutive ranges, one tile per useful thread
// (each row's sum of squares is done by one thread in a fixed order, so the thread count never
// changes a result).
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct RmsNormTiling {
  int64_t rows = 0, cols = 0;          // R = prod(x.shape[:-k]), N = numel(gamma)
  int threads = 1;                     // threads woken (= num_tiles, at most Platform.threads)
  int64_t num_tiles = 0;
  int64_t rows_per_tile = 0;           // tile t: rows [t * rows_per_tile, min(rows, (t + 1) * rows_per_tile))
  bool pack_rows = false;              // an operand's rows are not dense: gathered / scattered via scratch rows
  bool streaming_stores = false;       // y written with non-temporal stores (dense y, data beyond half the L3)
  int64_t gamma_offset = 0;            // workspace: gamma widened to fp32, N floats
  int64_t scratch_offset = 0;          // workspace: per-tile scratch rows (x, y) when pack_rows
  int64_t scratch_row_bytes = 0;       // one scratch row (N elements), a multiple of 64 bytes
  int64_t scratch_bytes_per_tile = 0;
  int64_t workspace_bytes = 0;
  Isa isa = Isa::kScalar;

  int64_t tile_begin(int64_t t) const { return t * rows_per_tile; }
  int64_t tile_end(int64_t t) const { return t + 1 < num_tiles ? (t + 1) * rows_per_tile : rows; }

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// rows x cols of elem_bytes-sized x; pack_rows: some operand's rows are not dense; y_dense: y's rows are.
TILEGRAD_API RmsNormTiling rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool y_dense,
                                           const core::Platform& platform);

}  // namespace tilegrad::ops
