// Embedding dense backward tiling: a pure function of (numel(indices), numWeights, D, element sizes,
// output layout) and the Platform. It never sees data: the per-row work split is computed at launch
// from the row counts the sort produced, with the cost weights chosen here.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct EmbeddingDenseBackwardTiling {
  int64_t num_indices = 0;  // L = numel(indices) = rows of grad_flat
  int64_t num_weights = 0;  // V = rows of out
  int64_t dim = 0;          // D = grad's last dim = out's columns
  // No sort, workspace 0: L == 0 (out is all zeros) or out has no elements (indices only checked).
  bool empty = true;

  // Rows far outnumber indices (V > kSparseRowsPerIndex * L): the indices are sorted by comparison
  // instead of counted (workspace O(L) instead of O(V); same sorted order, so the same bits) and the
  // accumulation walks the touched rows, zeroing the gaps between them.
  bool sparse = false;

  // Counting sort of the indices (stable, O(L + V)): tile c converts and checks indices
  // [c * sort_chunk, min(L, (c + 1) * sort_chunk)) and counts them in its own histogram.
  int sort_tiles = 0;
  int64_t sort_chunk = 0;
  // Prefix sums over the V rows, split in prefix_tiles ranges of prefix_chunk rows.
  int prefix_tiles = 0;
  int64_t prefix_chunk = 0;

  // Accumulation: accum_tiles disjoint ranges of output rows, balanced at launch so that every
  // tile gets the same cost, cost(rows) = grad_row_cost * (grad rows summed) + out_row_cost * rows.
  int accum_tiles = 0;
  int64_t grad_row_cost = 0;  // bytes read per gradient row (D * grad element size)
  int64_t out_row_cost = 0;   // bytes written per output row (D * out element size)
  // Rows of <= prefetch_row_bytes gradient bytes are software-prefetched a few sorted rows ahead
  // (random gathers of short rows are latency-bound; long rows stream through the hardware prefetcher).
  int64_t prefetch_row_bytes = 0;
  bool streaming_stores = false;  // out written with non-temporal stores (out larger than the cache)
  // One row holding more than a tile's share of the cost (e.g. a padding token repeated without
  // padding_idx) would serialise the row split: the launch then gives each accum tile a stripe of
  // columns of every row instead, stripes a multiple of column_quantum elements (whole cache lines).
  int64_t column_quantum = 0;

  // Workspace (64-byte aligned offsets, bytes).
  int64_t keys_offset = 0;    // int64[L]      converted indices
  int64_t src_offset = 0;     // int64[L]      grad row byte offsets, sorted by row, index order within
  int64_t starts_offset = 0;  // int64[V + 1]  first sorted entry of each row
  int64_t hist_offset = 0;    // int64[sort_tiles * V]  per-tile counts, then per-tile scatter cursors
  int64_t scratch_offset = 0; // int64[max(sort_tiles, prefix_tiles) + prefix_tiles + accum_tiles + 1]:
                              // first bad position per sort tile / prefix partial sums, the largest
                              // row count per prefix tile, then the row bounds of the accum tiles
  // Sparse path: keys (sorted in place), src and scratch as above, plus
  int64_t pairs_offset = 0;   // int64[2 * L]  (row, position) pairs sorted by row, then position
  int64_t workspace_bytes = 0;

  Isa isa = Isa::kScalar;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// Sparse path above this many output rows per index.
constexpr int64_t kSparseRowsPerIndex = 16;

// Every size is overflow-checked: a workspace that does not fit int64 throws 161002.
// grad_elem / out_elem: element sizes in bytes; out_rows_packed: out is one contiguous (V, D) block,
// so untouched rows form contiguous runs that can be streamed.
TILEGRAD_API EmbeddingDenseBackwardTiling embedding_dense_backward_tiling(int64_t num_indices, int64_t num_weights,
                                                                          int64_t dim, int64_t grad_elem,
                                                                          int64_t out_elem, bool out_rows_packed,
                                                                          const core::Platform& platform);

}  // namespace tilegrad::ops
