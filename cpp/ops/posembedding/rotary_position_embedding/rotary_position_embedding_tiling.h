// Rotary position embedding forward tiling: a pure function of the problem's shape, the element
// size, whether the output rows are 64-byte aligned, and the Platform. Also the row split and the
// streaming-store rule the grad's tiling reuses.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "ops/posembedding/rotary_position_embedding/rope_checks.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

// Rows cut into one tile per useful thread (consecutive rows each).
struct RopeRowTiles {
  int64_t rows = 0;
  int num_tiles = 0;
  int64_t tile_rows = 0;  // rows per tile; the last tile may have fewer

  int64_t begin(int64_t t) const { return t * tile_rows; }
  int64_t end(int64_t t) const { return t + 1 < num_tiles ? (t + 1) * tile_rows : rows; }
};
TILEGRAD_API RopeRowTiles plan_rope_rows(int64_t rows, int64_t d, const core::Platform& p);

// Whether every full-vector store into a row of `elem_bytes` elements with this pair layout lands on
// a 64-byte boundary once the row does (the condition for non-temporal stores): the planar blocks'
// bases and partners are whole multiples of 64 bytes.
TILEGRAD_API bool rope_stores_alignable(RopeMode mode, bool interleaved, int64_t d, int64_t elem_bytes);

// Non-temporal stores pay off when the data moved exceeds half the last-level cache.
TILEGRAD_API bool rope_streams(int64_t bytes_moved, const core::Platform& p);

struct RotaryPositionEmbeddingTiling {
  RopeShape shape;
  RopeRowTiles tiles;
  bool streaming_stores = false;  // y written with non-temporal stores
  Isa isa = Isa::kScalar;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// out_rows_aligned: y's rows start on 64-byte boundaries with a contiguous last dim (rope_rows_aligned).
TILEGRAD_API RotaryPositionEmbeddingTiling rotary_position_embedding_tiling(const RopeShape& shape, int64_t elem_bytes,
                                                                            bool out_rows_aligned,
                                                                            const core::Platform& platform);

}  // namespace tilegrad::ops
