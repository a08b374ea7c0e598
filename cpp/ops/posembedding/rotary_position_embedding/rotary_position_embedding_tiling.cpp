#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_tiling.h"

#include <algorithm>

#include "core/tiling.h"

namespace tilegrad::ops {

RopeRowTiles plan_rope_rows(int64_t rows, int64_t d, const core::Platform& p) {
  RopeRowTiles t;
  t.rows = rows;
  if (rows <= 0) return t;
  const int64_t threads = core::useful_threads(rows * std::max<int64_t>(d, 1), p);
  t.tile_rows = (rows + threads - 1) / threads;
  t.num_tiles = static_cast<int>((rows + t.tile_rows - 1) / t.tile_rows);
  return t;
}

bool rope_stores_alignable(RopeMode mode, bool interleaved, int64_t d, int64_t elem_bytes) {
  if (interleaved) return true;  // vectors at 2i: multiples of the vector size from the row start
  RopeBlock blocks[2];
  const int nb = rope_blocks(mode, d, blocks);
  for (int b = 0; b < nb; ++b)
    if ((blocks[b].base * elem_bytes) % 64 != 0 || (blocks[b].partner * elem_bytes) % 64 != 0) return false;
  return true;
}

bool rope_streams(int64_t bytes_moved, const core::Platform& p) { return bytes_moved > p.l3_bytes / 2; }

RotaryPositionEmbeddingTiling rotary_position_embedding_tiling(const RopeShape& shape, int64_t elem_bytes,
                                                               bool out_rows_aligned, const core::Platform& platform) {
  RotaryPositionEmbeddingTiling t;
  t.shape = shape;
  t.tiles = plan_rope_rows(shape.rows(), shape.d, platform);
  const int64_t bytes = (2 * shape.rows() + 2 * shape.cos_rows()) * shape.d * elem_bytes;
  t.streaming_stores = out_rows_aligned && rope_streams(bytes, platform) &&
                       rope_stores_alignable(shape.mode, rope_y_interleaved(shape.mode), shape.d, elem_bytes);
  t.isa = platform.isa;
  return t;
}

void RotaryPositionEmbeddingTiling::describe(core::FieldVisitor& v) const {
  const std::string pattern = shape.cos_pattern();
  v.fields({{"mode", static_cast<int>(shape.mode)},
            {"mode_name", rope_mode_name(shape.mode)},
            {"rows", tiles.rows},
            {"d", shape.d},
            {"cos_rows", shape.cos_rows()},
            {"cos_pattern", pattern.c_str()},
            {"num_tiles", tiles.num_tiles},
            {"tile_rows", tiles.tile_rows},
            {"streaming_stores", streaming_stores},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
