// BCE-with-logits forward tiling: a pure function of the element count, the bytes each element
// moves, the output layout, the reduction and the Platform.
//
// reduction none: the elementwise split of core/elementwise.h (per-thread element ranges, streaming
// stores for large outputs). mean / sum: the elements are cut into blocks of a fixed size that never
// depends on the thread count; each block's sum lands in its own workspace slot and the slots are
// added in block order, so the result is bit-identical for any number of threads. Tiles are whole
// runs of blocks.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct BceForwardTiling {
  core::ElementwiseTiling tiles;  // per-thread element ranges (mean / sum: whole blocks each)
  Isa isa = Isa::kScalar;         // kernel level the tiles run at
  int64_t reduction = 1;          // 0 none, 1 mean, 2 sum
  int64_t block_elems = 0;        // mean / sum: elements per partial sum; 0 for none
  int64_t num_blocks = 0;         // mean / sum: partial sums (one double each in the workspace)
  uint64_t workspace_bytes = 0;   // num_blocks * 8

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// Elements per partial sum of mean / sum: a multiple of every vector width and of the 64-element
// tile alignment, large enough that the block sums cost nothing next to the elements.
constexpr int64_t kBceForwardBlockElems = 8192;

// numel: elements of self; bytes_per_elem: bytes one element moves (operands that broadcast count 0;
// the output only for none); out_contiguous: the output's innermost run is contiguous (none);
// reduction 0/1/2.
TILEGRAD_API BceForwardTiling bce_forward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                                 int64_t reduction, const core::Platform& platform);

}  // namespace tilegrad::ops
