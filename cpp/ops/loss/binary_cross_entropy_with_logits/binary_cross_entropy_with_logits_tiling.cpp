#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_tiling.h"

#include <algorithm>

#include "core/tiling.h"
#include "core/workspace.h"

namespace tilegrad::ops {

namespace {

// mean / sum: whole blocks per tile, as evenly as the useful thread count allows.
void plan_blocks(BceForwardTiling& t, int64_t numel, const core::Platform& platform) {
  t.block_elems = kBceForwardBlockElems;
  t.num_blocks = (numel + t.block_elems - 1) / t.block_elems;
  t.workspace_bytes =
      static_cast<uint64_t>(core::checked_mul("aclnnBinaryCrossEntropyWithLogits", "workspace block sums", t.num_blocks, 8));
  t.tiles.numel = numel;
  if (numel <= 0) return;
  const int64_t threads = std::min(core::useful_threads(numel, platform), t.num_blocks);
  const int64_t blocks_per_tile = (t.num_blocks + threads - 1) / threads;
  t.tiles.tile_elems = blocks_per_tile * t.block_elems;
  t.tiles.num_tiles = static_cast<int>((t.num_blocks + blocks_per_tile - 1) / blocks_per_tile);
  t.tiles.streaming_stores = false;  // nothing large is written
}

}  // namespace

BceForwardTiling bce_forward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int64_t reduction,
                                    const core::Platform& platform) {
  BceForwardTiling t;
  t.isa = platform.isa;
  t.reduction = reduction;
  if (reduction == 0)
    t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  else
    plan_blocks(t, numel, platform);
  return t;
}

void BceForwardTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}, {"reduction", reduction}, {"block_elems", block_elems}, {"num_blocks", num_blocks},
            {"workspace_bytes", workspace_bytes}});
}

}  // namespace tilegrad::ops
