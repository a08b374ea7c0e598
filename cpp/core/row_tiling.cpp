#include "core/row_tiling.h"

#include <algorithm>

#include "core/row_sweep.h"
#include "core/tiling.h"
#include "core/workspace.h"

namespace tilegrad::core {

namespace {

// Equal ranges of consecutive rows, one per useful thread (at most one per row).
RowBlocks per_thread_ranges(int64_t rows, int64_t cols, const Platform& platform) {
  RowBlocks rb;
  rb.rows = rows;
  rb.cols = cols;
  rb.block_rows = 0;  // no tiles: rows_per_tile 0
  if (rows > 0 && cols > 0) {
    const int64_t tiles = std::min<int64_t>(useful_threads(rows * cols, platform), rows);
    rb.block_rows = (rows + tiles - 1) / tiles;
    rb.num_blocks = (rows + rb.block_rows - 1) / rb.block_rows;
  }
  return rb;
}

// vectors | partials | scratch rows: the regions RowOpNeeds lists, in that order.
void lay_out_workspace(const RowOpNeeds& needs, RowTiling& t, int64_t elem_bytes) {
  WorkspaceLayout ws(needs.op);
  for (size_t v = 0; v < needs.vectors.size(); ++v) {
    const FloatVectors& f = needs.vectors[v];
    if (f.count > 0) t.vector_offsets[v] = ws.take(f.what, checked_mul(needs.op, f.what, t.cols, f.count), 4);
  }
  if (needs.partial_sets > 0)
    t.partials_offset = ws.take("workspace partials",
                                checked_mul(needs.op, "workspace partials", t.tiles.num_blocks, needs.partial_sets),
                                t.tiles.partial_stride() * 4);
  t.scratch_row_bytes = aligned_bytes(needs.op, "workspace scratch row", t.cols, elem_bytes);
  const int64_t scratch_rows = t.pack_rows ? needs.scratch_rows : 0;
  t.scratch_bytes_per_tile = checked_mul(needs.op, "workspace scratch rows", scratch_rows, t.scratch_row_bytes);
  t.scratch_offset = ws.take("workspace scratch rows",
                             checked_mul(needs.op, "workspace scratch rows", t.tiles.num_blocks, scratch_rows),
                             t.scratch_row_bytes);
  // Without rows, or with empty ones, a launch does nothing (or writes its outputs directly).
  t.workspace_bytes = t.rows > 0 && t.cols > 0 ? ws.bytes() : 0;
}

}  // namespace

RowTiling row_tiling(const RowOpNeeds& needs, int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                     bool out_dense, const Platform& platform) {
  RowTiling t;
  t.rows = rows;
  t.cols = cols;
  t.split = needs.split;
  t.isa = platform.isa;
  t.pack_rows = pack_rows;
  t.tiles = needs.split == RowSplit::kPerThread ? per_thread_ranges(rows, cols, platform)
                                                 : plan_row_blocks(rows, cols);
  t.threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(useful_threads(rows * cols, platform), t.tiles.num_blocks)));
  // Each stream moved once: beyond half the L3 the written lines would only evict useful ones.
  t.streaming_stores = out_dense && !pack_rows && rows * cols * needs.streams * elem_bytes > platform.l3_bytes / 2;
  if (needs.split == RowSplit::kShapeBlocks && !pack_rows) {
    const int64_t row_pair_bytes = std::max<int64_t>(1, 2 * cols * elem_bytes);
    t.sweep_rows = std::clamp<int64_t>(platform.l2_bytes / 4 / row_pair_bytes, 1, RowSweep::kMaxRows);
  }
  lay_out_workspace(needs, t, elem_bytes);
  return t;
}

void RowTiling::describe(FieldVisitor& v) const {
  v.fields({{"rows", rows}, {"cols", cols}, {"num_tiles", tiles.num_blocks}});
  if (split == RowSplit::kPerThread)
    v.fields({{"rows_per_tile", tiles.block_rows}});
  else
    v.fields({{"block_rows", tiles.block_rows}, {"tile_threads", threads}, {"sweep_rows", sweep_rows}});
  v.fields({{"pack_rows", pack_rows},
            {"streaming_stores", streaming_stores},
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

}  // namespace tilegrad::core
