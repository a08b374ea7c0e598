// Rotary position embedding gradient tiling: a pure function of the problem's shape, the element
// size, whether x is given, whether dx's rows are 64-byte aligned, and the Platform.
//
// Without x: dx alone, rows split like the forward. With x: the work is grouped by cos row (a
// "group" is every dy row that read one cos row in the forward, in row-major order); each group's
// rows are cut into the blocks of core::plan_row_blocks(rows per group, 2 * D), a function of the
// shape alone. A unit (group, block) computes its rows' dx and sums dy * x and dy * rotate(x) over
// them into one fp32 partial; units are independent, so any thread may run any unit. With one block
// per group the partial is rounded straight into dcos / dsin; otherwise a second pass adds each
// group's partials in block order (core::sum_row_block_partials) and rounds once. The same bits
// for every thread count.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/ordered_reduce.h"
#include "core/platform.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_tiling.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct RotaryPositionEmbeddingGradTiling {
  RopeShape shape;
  bool with_x = false;        // dcos / dsin computed
  RopeRowTiles tiles;         // without x: dy rows; with x: units (group-major, then block)
  int64_t groups = 0;         // with x: cos rows
  int64_t group_rows = 0;     // with x: dy rows per cos row
  core::RowBlocks blocks;     // with x: one group's rows cut into blocks (cols = 2 D: dcos, dsin)
  RopeRowTiles final_tiles;   // with x and more than one block per group: groups of the second pass
  uint64_t workspace_bytes = 0;  // groups * blocks.workspace_bytes() when there is a second pass
  bool streaming_stores = false;  // without x: dx written with non-temporal stores
  Isa isa = Isa::kScalar;

  int64_t units() const { return with_x ? groups * blocks.num_blocks : 0; }
  bool second_pass() const { return with_x && blocks.num_blocks > 1; }

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API RotaryPositionEmbeddingGradTiling rotary_position_embedding_grad_tiling(const RopeShape& shape,
                                                                                     int64_t elem_bytes, bool with_x,
                                                                                     bool dx_rows_aligned,
                                                                                     const core::Platform& platform);

}  // namespace tilegrad::ops
