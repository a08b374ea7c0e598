// aclnnLayerNorm / aclnnLayerNormBackward tilings: pure functions of the row count and length, the
// element size, the operands' layouts and the Platform.
//
// Forward: rows split into equal consecutive ranges, one tile per useful thread (each row's mean and
// variance are summed by one thread in a fixed order, so the thread count never changes a result).
// Backward: rows cut into core::RowBlocks (core/ordered_reduce.h), whose size depends only on the
// shape; one tile per block. A tile writes dx for its rows and accumulates its dweight / dbias partials
// in row order; the partials are then summed in block order, so both are bit-identical for every
// thread count.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/ordered_reduce.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct LayerNormTiling {
  int64_t rows = 0, cols = 0;          // M = prod(leading dims), N = prod(normalizedShape)
  int threads = 1;                     // threads woken (= num_tiles, at most Platform.threads)
  int64_t num_tiles = 0;
  int64_t rows_per_tile = 0;           // tile t: rows [t * rows_per_tile, min(rows, (t + 1) * rows_per_tile))
  bool pack_rows = false;              // an operand's rows are not dense: gathered / scattered via scratch rows
  bool streaming_stores = false;       // out written with non-temporal stores (dense, beyond half the L3)
  int64_t weight_offset = 0;           // workspace: weight then bias widened to fp32 (2N floats)
  int64_t scratch_offset = 0;          // workspace: per-tile scratch rows (x, out) when pack_rows
  int64_t scratch_row_bytes = 0;       // one scratch row (N elements), a multiple of 64 bytes
  int64_t scratch_bytes_per_tile = 0;
  int64_t workspace_bytes = 0;
  Isa isa = Isa::kScalar;

  int64_t tile_begin(int64_t t) const { return t * rows_per_tile; }
  int64_t tile_end(int64_t t) const { return t + 1 < num_tiles ? (t + 1) * rows_per_tile : rows; }

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API LayerNormTiling layer_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                               bool out_dense, const core::Platform& platform);

struct LayerNormBackwardTiling {
  int64_t rows = 0, cols = 0;        // M rows of N
  core::RowBlocks blocks;            // the tiles (one per block) and dweight / dbias's summation order
  int threads = 1;                   // threads woken for the tiles and the final sums
  bool pack_rows = false;            // an operand's rows are not dense: gathered / scattered via scratch rows
  bool streaming_stores = false;     // dx written with non-temporal stores
  int64_t weight_offset = 0;         // workspace: weight widened to fp32 (N floats)
  int64_t sums_offset = 0;           // workspace: dweight, dbias in fp32 before their store (2N floats)
  int64_t partials_offset = 0;       // workspace: the blocks' fp32 dweight partials, then the dbias ones
  int64_t scratch_offset = 0;        // workspace: per-tile scratch rows (dy, x, dx) when pack_rows
  int64_t scratch_row_bytes = 0;     // one scratch row (N elements), a multiple of 64 bytes
  int64_t scratch_bytes_per_tile = 0;
  int64_t workspace_bytes = 0;
  Isa isa = Isa::kScalar;

  // The dbias partials follow the dweight ones.
  int64_t bias_partials_offset() const { return partials_offset + blocks.workspace_bytes(); }

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API LayerNormBackwardTiling layer_norm_backward_tiling(int64_t rows, int64_t cols, int64_t elem_bytes,
                                                                bool pack_rows, bool dx_dense,
                                                                const core::Platform& platform);

}  // namespace tilegrad::ops
