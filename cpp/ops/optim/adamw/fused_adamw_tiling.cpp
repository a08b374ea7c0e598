#include "ops/optim/adamw/fused_adamw_tiling.h"

#include <algorithm>

namespace tilegrad::ops::adamw {
namespace {

// Position of byte `target` of the concatenation, as (tensor, element) rounded down to an aligned
// element (never past the tensor's end).
struct Position {
  int64_t slot = 0, elem = 0;
};

Position locate(int64_t target, const std::vector<int64_t>& numel, const std::vector<int64_t>& bpe) {
  int64_t before = 0;
  for (size_t i = 0; i < numel.size(); ++i) {
    const int64_t bytes = numel[i] * bpe[i];
    if (target < before + bytes) {
      const int64_t elem = (target - before) / bpe[i];
      return {static_cast<int64_t>(i), elem / kAlignElems * kAlignElems};
    }
    before += bytes;
  }
  return {static_cast<int64_t>(numel.size()), 0};
}

bool before_or_at(const Position& a, const Position& b) {
  return a.slot < b.slot || (a.slot == b.slot && a.elem <= b.elem);
}

}  // namespace

AdamWTiling adamw_tiling(const std::vector<int64_t>& numel, const std::vector<int64_t>& bpe,
                         const core::Platform& platform) {
  AdamWTiling t;
  t.isa = platform.isa;
  t.norm_block_elems = kNormBlockElems;
  for (size_t i = 0; i < numel.size(); ++i) {
    t.total_bytes += numel[i] * bpe[i];
    t.norm_blocks += (numel[i] + kNormBlockElems - 1) / kNormBlockElems;
  }
  const int64_t wanted = std::max<int64_t>(1, t.total_bytes / kMinTileBytes);
  const int tiles = static_cast<int>(std::min<int64_t>(std::max(platform.threads, 1), wanted));
  std::vector<Position> cut(tiles + 1);
  cut[0] = {0, 0};
  cut[tiles] = {static_cast<int64_t>(numel.size()), 0};
  for (int k = 1; k < tiles; ++k) {
    // k * total / tiles without overflow for any realistic total (< 2^63 / 256).
    cut[k] = locate(t.total_bytes / tiles * k + t.total_bytes % tiles * k / tiles, numel, bpe);
    if (!before_or_at(cut[k - 1], cut[k])) cut[k] = cut[k - 1];
  }
  t.tile_begin.push_back(0);
  for (int k = 0; k < tiles; ++k) {
    for (int64_t s = cut[k].slot; s <= cut[k + 1].slot && s < static_cast<int64_t>(numel.size()); ++s) {
      const int64_t b = s == cut[k].slot ? cut[k].elem : 0;
      const int64_t e = s == cut[k + 1].slot ? cut[k + 1].elem : numel[s];
      if (e > b) t.segments.push_back({s, b, e});
    }
    t.tile_begin.push_back(static_cast<int64_t>(t.segments.size()));
  }
  t.num_tiles = tiles;
  return t;
}

void AdamWTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"num_tiles", num_tiles},
            {"segments", static_cast<int64_t>(segments.size())},
            {"total_bytes", total_bytes},
            {"norm_block_elems", norm_block_elems},
            {"norm_blocks", norm_blocks},
            {"isa", isa}});
}

}  // namespace tilegrad::ops::adamw
