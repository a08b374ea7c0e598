#include "ops/norm/rms_norm/rms_norm_tiling.h"

#include <algorithm>

#include "core/tiling.h"

namespace tilegrad::ops {

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
  t.gamma_offset = 0;
  t.scratch_offset = round_up_64(cols * 4);
  t.scratch_bytes_per_tile = pack_rows ? 2 * round_up_64(cols * elem_bytes) : 0;
  t.workspace_bytes = rows > 0 ? t.scratch_offset + t.num_tiles * t.scratch_bytes_per_tile : 0;
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
