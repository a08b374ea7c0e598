// AdamW tiling: one parallel region over every tensor of a call, split by bytes so that one huge
// embedding and many small norm vectors balance across threads. A pure function of the tensors'
// element counts, the bytes an element of each moves, and the Platform.
#pragma once

#include <cstdint>
#include <vector>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops::adamw {

// Elements [begin, end) of tensor `slot`.
struct Segment {
  int64_t slot = 0, begin = 0, end = 0;
};

struct AdamWTiling {
  int num_tiles = 0;
  // Tile t runs segments[tile_begin[t] .. tile_begin[t + 1]); tile_begin has num_tiles + 1 entries.
  std::vector<int64_t> tile_begin;
  std::vector<Segment> segments;
  int64_t total_bytes = 0;   // bytes every element of every tensor moves, summed
  // Gradient-norm pass (max_grad_norm): fixed blocks of each tensor, independent of the threads, one
  // partial sum each, added in block order (the same value for any thread count).
  int64_t norm_block_elems = 0;
  int64_t norm_blocks = 0;
  Isa isa = Isa::kScalar;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// Tile boundaries fall on multiples of kAlignElems inside a tensor (cache-line starts for fp32),
// every tile but the last gets total_bytes / num_tiles within one alignment unit of one tensor, and
// a tile is only worth a thread with at least kMinTileBytes.
constexpr int64_t kAlignElems = 64;
constexpr int64_t kMinTileBytes = 256 << 10;
constexpr int64_t kNormBlockElems = 65536;

TILEGRAD_API AdamWTiling adamw_tiling(const std::vector<int64_t>& numel, const std::vector<int64_t>& bytes_per_elem,
                                      const core::Platform& platform);

}  // namespace tilegrad::ops::adamw
