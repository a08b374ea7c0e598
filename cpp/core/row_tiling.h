// The tiling of the row-wise operators (RMSNorm, AddRmsNorm, LayerNorm and their gradients): R rows of
// N elements, each row handled whole by one thread (its statistics summed in an order fixed by the
// row). A pure function of the row count and length, the element size, the operands' layouts, what
// the operator keeps in its workspace (RowOpNeeds, a constant of the operator) and the Platform.
//
// The rows are cut into tiles of consecutive rows (a RowBlocks, core/ordered_reduce.h), one of two ways:
//   RowSplit::kPerThread (the forwards): equal ranges, one per useful thread. A row's result does not
//     depend on its tile, so the thread count changes no bit.
//   RowSplit::kShapeBlocks (the gradients): plan_row_blocks, whose size depends only on the shape. A
//     tile accumulates its parameter gradients' fp32 partials in row order; the partials are summed
//     in block order, so those gradients are bit-identical for every thread count.
//
// The workspace, each region 64-byte aligned (core/workspace.h):
//   the operator's fp32 vectors of N floats (gamma widened to fp32, dgamma before its scatter, ...)
//   | (kShapeBlocks) partial_sets sets of the blocks' fp32 partials
//   | per tile, scratch_rows rows of N elements when some operand's rows are not dense (pack_rows):
//     the rows the kernels cannot take in place are gathered into / scattered from them.
// An operator's tiling adds only names: which vector is its gamma, which scratch row its x.
#pragma once

#include <array>
#include <cstdint>

#include "core/describe.h"
#include "core/ordered_reduce.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::core {

enum class RowSplit { kPerThread, kShapeBlocks };

// Adjacent fp32 vectors of N floats, one workspace region.
struct FloatVectors {
  const char* what = nullptr;  // the region's name in an overflow error ("workspace gamma")
  int64_t count = 0;           // vectors in the region (LayerNorm's weight and bias: 2); 0: no region
};

// What a row-wise operator needs beyond its shape: a constant of the operator.
struct RowOpNeeds {
  const char* op = nullptr;  // names the operator in overflow errors
  RowSplit split = RowSplit::kPerThread;
  // rows x cols arrays a launch reads or writes once each (x and y: 2; dy, x and dx: 3): the data
  // moved, which decides the streaming stores.
  int64_t streams = 2;
  std::array<FloatVectors, 2> vectors{};  // the workspace's fp32 vectors, in order
  int64_t partial_sets = 0;               // kShapeBlocks: fp32 column-sum partials per block (dgamma: 1)
  int64_t scratch_rows = 0;               // scratch rows per tile when pack_rows
};

struct RowTiling {
  int64_t rows = 0, cols = 0;
  RowSplit split = RowSplit::kPerThread;
  RowBlocks tiles;                // the tiles; kShapeBlocks: also the partials' summation order
  int threads = 1;                // threads woken for the tiles (and the partials' final sum)
  bool pack_rows = false;         // an operand's rows are not dense: gathered / scattered via scratch rows
  bool streaming_stores = false;  // the output written with non-temporal stores (dense, beyond half the L3)
  std::array<int64_t, 2> vector_offsets{};  // workspace: RowOpNeeds::vectors
  int64_t partials_offset = 0;              // workspace: partial set s at partials_offset + s * tiles.workspace_bytes()
  int64_t scratch_offset = 0;               // workspace: scratch_bytes_per_tile per tile
  int64_t scratch_row_bytes = 0;            // one scratch row (N elements), a multiple of 64 bytes
  int64_t scratch_bytes_per_tile = 0;
  // kShapeBlocks: rows per kernel call (core::RowSweep): as many as keep their dy and x rows within a
  // quarter of L2, at most RowSweep::kMaxRows; one when rows are gathered into scratch rows.
  int64_t sweep_rows = 1;
  int64_t workspace_bytes = 0;              // 0 when there is nothing to do (no rows or empty rows)
  Isa isa = Isa::kScalar;

  int64_t num_tiles() const { return tiles.num_blocks; }
  int64_t tile_begin(int64_t t) const { return tiles.begin(t); }
  int64_t tile_end(int64_t t) const { return tiles.end(t); }
  // The first fp32 vector of region v of RowOpNeeds::vectors.
  float* float_vector(char* workspace, int v) const {
    return reinterpret_cast<float*>(workspace + vector_offsets[v]);
  }
  // The fp32 partials of partial set s (RowBlocks::partial indexes them by block).
  char* partials(char* workspace, int64_t s) const {
    return workspace + partials_offset + s * tiles.workspace_bytes();
  }
  // Scratch row i of tile t.
  char* scratch_row(char* workspace, int64_t t, int64_t i) const {
    return workspace + scratch_offset + t * scratch_bytes_per_tile + i * scratch_row_bytes;
  }

  // kPerThread lists rows_per_tile; kShapeBlocks block_rows, tile_threads (not "threads": the
  // launch's trace line prints the thread count in force) and sweep_rows.
  TILEGRAD_API void describe(FieldVisitor& v) const;
};

// rows x cols of elem_bytes-sized elements; pack_rows: some operand's rows are not dense; out_dense:
// the rows the launch writes (y, dx) are.
TILEGRAD_API RowTiling row_tiling(const RowOpNeeds& needs, int64_t rows, int64_t cols, int64_t elem_bytes,
                                  bool pack_rows, bool out_dense, const Platform& platform);

}  // namespace tilegrad::core
