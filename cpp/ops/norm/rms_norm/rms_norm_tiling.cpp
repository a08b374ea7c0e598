#include "ops/norm/rms_norm/rms_norm_tiling.h"

#include <algorithm>

#include "core/tiling.h"
#include "core/workspace.h"

namespace tilegrad::ops {

namespace {
constexpr const char* kOp = "aclnnRmsNorm";
}  // namespace

RmsNormTiling rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool y_dense,
                              const core::Platform& platform) {
  RmsNormTiling t;
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
  // x read once, y written once: beyond half the L3 the written lines would only evict useful ones.
  t.streaming_stores = y_dense && !pack_rows && rows * cols * 2 * elem_bytes > platform.l3_bytes / 2;
  // gamma | x and y scratch rows per tile
  core::WorkspaceLayout ws(kOp);
  t.gamma_offset = ws.take("workspace gamma", cols, 4);
  t.scratch_row_bytes = core::aligned_bytes(kOp, "workspace scratch row", cols, elem_bytes);
  const int64_t scratch_rows = pack_rows ? 2 : 0;
  t.scratch_bytes_per_tile = scratch_rows * t.scratch_row_bytes;
  t.scratch_offset = ws.take("workspace scratch rows",
                             core::checked_mul(kOp, "workspace scratch rows", t.num_tiles, scratch_rows),
                             t.scratch_row_bytes);
  t.workspace_bytes = rows > 0 ? ws.bytes() : 0;
  return t;
}

void RmsNormTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"rows", rows},
            {"cols", cols},
            {"num_tiles", num_tiles},
            {"rows_per_tile", rows_per_tile},
            {"pack_rows", pack_rows},
            {"streaming_stores", streaming_stores},
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
