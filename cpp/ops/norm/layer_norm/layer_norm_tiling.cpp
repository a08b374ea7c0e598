#include "ops/norm/layer_norm/layer_norm_tiling.h"

#include <algorithm>

#include "core/tiling.h"
#include "core/workspace.h"

namespace tilegrad::ops {

namespace {
constexpr const char* kOp = "aclnnLayerNorm";
constexpr const char* kBackward = "aclnnLayerNormBackward";
}  // namespace

LayerNormTiling layer_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool out_dense,
                                  const core::Platform& platform) {
  LayerNormTiling t;
  t.rows = rows;
  t.cols = cols;
  t.isa = platform.isa;
  t.pack_rows = pack_rows;
  if (rows > 0 && cols > 0) {
    const int64_t tiles = std::min<int64_t>(core::useful_threads(rows * cols, platform), rows);
    t.rows_per_tile = (rows + tiles - 1) / tiles;
    t.num_tiles = (rows + t.rows_per_tile - 1) / t.rows_per_tile;
  }
  t.threads = static_cast<int>(std::max<int64_t>(1, t.num_tiles));
  // x read (twice, from L1/L2 the second time), out written once: beyond half the L3 the written
  // lines would only evict useful ones.
  t.streaming_stores = out_dense && !pack_rows && rows * cols * 2 * elem_bytes > platform.l3_bytes / 2;
  // weight, bias | x and out scratch rows per tile
  core::WorkspaceLayout ws(kOp);
  t.weight_offset = ws.take("workspace weight and bias", core::checked_mul(kOp, "workspace weight", cols, 2), 4);
  t.scratch_row_bytes = core::aligned_bytes(kOp, "workspace scratch row", cols, elem_bytes);
  const int64_t scratch_rows = pack_rows ? 2 : 0;
  t.scratch_bytes_per_tile = scratch_rows * t.scratch_row_bytes;
  t.scratch_offset = ws.take("workspace scratch rows",
                             core::checked_mul(kOp, "workspace scratch rows", t.num_tiles, scratch_rows),
                             t.scratch_row_bytes);
  t.workspace_bytes = rows > 0 && cols > 0 ? ws.bytes() : 0;
  return t;
}

void LayerNormTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"rows", rows},
            {"cols", cols},
            {"num_tiles", num_tiles},
            {"rows_per_tile", rows_per_tile},
            {"pack_rows", pack_rows},
            {"streaming_stores", streaming_stores},
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

LayerNormBackwardTiling layer_norm_backward_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                                   bool dx_dense, const core::Platform& platform) {
  LayerNormBackwardTiling t;
  t.rows = rows;
  t.cols = cols;
  t.isa = platform.isa;
  t.pack_rows = pack_rows;
  t.blocks = core::plan_row_blocks(rows, cols);
  t.threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(core::useful_threads(rows * cols, platform), t.blocks.num_blocks)));
  // dy and x read once, dx written once.
  t.streaming_stores = dx_dense && !pack_rows && rows * cols * 3 * elem_bytes > platform.l3_bytes / 2;
  // weight | dweight, dbias | dweight partials, dbias partials | dy, x, dx scratch rows per tile
  core::WorkspaceLayout ws(kBackward);
  t.weight_offset = ws.take("workspace weight", cols, 4);
  t.sums_offset = ws.take("workspace dweight and dbias", core::checked_mul(kBackward, "workspace sums", cols, 2), 4);
  t.partials_offset =
      ws.take("workspace partials", core::checked_mul(kBackward, "workspace partials", t.blocks.num_blocks, 2),
              t.blocks.partial_stride() * 4);
  t.scratch_row_bytes = core::aligned_bytes(kBackward, "workspace scratch row", cols, elem_bytes);
  const int64_t scratch_rows = pack_rows ? 3 : 0;
  t.scratch_bytes_per_tile = scratch_rows * t.scratch_row_bytes;
  t.scratch_offset = ws.take("workspace scratch rows",
                             core::checked_mul(kBackward, "workspace scratch rows", t.blocks.num_blocks, scratch_rows),
                             t.scratch_row_bytes);
  t.workspace_bytes = rows > 0 && cols > 0 ? ws.bytes() : 0;
  return t;
}

void LayerNormBackwardTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"rows", rows},
            {"cols", cols},
            {"num_tiles", blocks.num_blocks},
            {"block_rows", blocks.block_rows},
            {"tile_threads", threads},  // not "threads": the launch prints the thread count in force
            {"pack_rows", pack_rows},
            {"streaming_stores", streaming_stores},
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
