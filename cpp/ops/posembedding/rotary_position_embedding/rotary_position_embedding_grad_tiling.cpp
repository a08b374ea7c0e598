#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_tiling.h"

#include "core/workspace.h"

namespace tilegrad::ops {

RotaryPositionEmbeddingGradTiling rotary_position_embedding_grad_tiling(const RopeShape& shape, int64_t elem_bytes,
                                                                        bool with_x, bool dx_rows_aligned,
                                                                        const core::Platform& platform) {
  RotaryPositionEmbeddingGradTiling t;
  t.shape = shape;
  t.with_x = with_x;
  t.isa = platform.isa;
  const int64_t rows = shape.rows();
  if (!with_x) {
    t.tiles = plan_rope_rows(rows, shape.d, platform);
    const int64_t bytes = (2 * rows + 2 * shape.cos_rows()) * shape.d * elem_bytes;
    t.streaming_stores = dx_rows_aligned && rope_streams(bytes, platform) &&
                         rope_stores_alignable(shape.mode, rope_x_interleaved(shape.mode), shape.d, elem_bytes);
    return t;
  }
  t.groups = shape.cos_rows();
  t.group_rows = t.groups > 0 ? rows / t.groups : 0;
  t.blocks = core::plan_row_blocks(t.group_rows, 2 * shape.d);
  // A unit's work is its block's rows; the split balances units, consecutive ones per thread.
  t.tiles = plan_rope_rows(t.units(), t.blocks.block_rows * shape.d, platform);
  if (t.second_pass()) {
    t.final_tiles = plan_rope_rows(t.groups, t.blocks.num_blocks * shape.d, platform);
    t.workspace_bytes = static_cast<uint64_t>(core::checked_mul("aclnnRotaryPositionEmbeddingGrad", "workspace partials",
                                                                t.groups, t.blocks.workspace_bytes()));
  }
  return t;
}

void RotaryPositionEmbeddingGradTiling::describe(core::FieldVisitor& v) const {
  const std::string pattern = shape.cos_pattern();
  v.fields({{"mode", static_cast<int>(shape.mode)},
            {"mode_name", rope_mode_name(shape.mode)},
            {"rows", shape.rows()},
            {"d", shape.d},
            {"cos_rows", shape.cos_rows()},
            {"cos_pattern", pattern.c_str()},
            {"with_x", with_x},
            {"num_tiles", tiles.num_tiles},
            {"tile_rows", tiles.tile_rows},
            {"groups", groups},
            {"group_rows", group_rows},
            {"block_rows", blocks.block_rows},
            {"blocks_per_group", blocks.num_blocks},
            {"second_pass", second_pass()},
            {"final_tiles", final_tiles.num_tiles},
            {"workspace_bytes", workspace_bytes},
            {"streaming_stores", streaming_stores},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
