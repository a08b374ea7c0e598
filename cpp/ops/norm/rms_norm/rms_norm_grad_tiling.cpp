#include "ops/norm/rms_norm/rms_norm_grad_tiling.h"

#include <algorithm>

#include "core/tiling.h"
#include "core/workspace.h"

namespace tilegrad::ops {

namespace {
constexpr const char* kOp = "aclnnRmsNormGrad";
}  // namespace

RmsNormGradTiling rms_norm_grad_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool dx_dense,
                                       const core::Platform& platform) {
  RmsNormGradTiling t;
  t.rows = rows;
  t.cols = cols;
  t.isa = platform.isa;
  t.pack_rows = pack_rows;
  t.blocks = core::plan_row_blocks(rows, cols);
  t.threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(core::useful_threads(rows * cols, platform), t.blocks.num_blocks)));
  // dy and x read once, dx written once.
  t.streaming_stores = dx_dense && !pack_rows && rows * cols * 3 * elem_bytes > platform.l3_bytes / 2;
  // gamma | dgamma | the blocks' partials | dy, x, dx and dresidual (AddRmsNorm's backward) scratch
  // rows per tile
  core::WorkspaceLayout ws(kOp);
  t.gamma_offset = ws.take("workspace gamma", cols, 4);
  t.dgamma_offset = ws.take("workspace dgamma", cols, 4);
  t.partials_offset = ws.take("workspace dgamma partials", t.blocks.num_blocks, t.blocks.partial_stride() * 4);
  t.scratch_row_bytes = core::aligned_bytes(kOp, "workspace scratch row", cols, elem_bytes);
  const int64_t scratch_rows = pack_rows ? 4 : 0;
  t.scratch_bytes_per_tile = scratch_rows * t.scratch_row_bytes;
  t.scratch_offset = ws.take("workspace scratch rows",
                             core::checked_mul(kOp, "workspace scratch rows", t.blocks.num_blocks, scratch_rows),
                             t.scratch_row_bytes);
  t.workspace_bytes = cols > 0 ? ws.bytes() : 0;
  return t;
}

void RmsNormGradTiling::describe(core::FieldVisitor& v) const {
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
