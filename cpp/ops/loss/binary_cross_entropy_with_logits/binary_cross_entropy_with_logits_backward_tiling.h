// BCE-with-logits backward tiling: a pure function of the element count, the bytes each element
// moves, the output layout, the reduction and the Platform.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct BceBackwardTiling {
  core::ElementwiseTiling tiles;  // per-thread element ranges, streaming-store decision
  Isa isa = Isa::kScalar;         // kernel level the tiles run at
  float scale = 1.0f;             // 1 / max(1, numel) for reduction 1 (mean), else 1

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// numel: elements of self (= out); bytes_per_elem: bytes one output element moves (operands that
// broadcast count 0); out_contiguous: the output's innermost run is contiguous; reduction 0/1/2.
TILEGRAD_API BceBackwardTiling bce_backward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                                   int64_t reduction, const core::Platform& platform);

}  // namespace tilegrad::ops
