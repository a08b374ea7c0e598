// SiLU backward tiling: a pure function of the element count, the bytes each element moves, the
// output layout and the Platform.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct SiluBackwardTiling {
  core::ElementwiseTiling tiles;  // per-thread element ranges, streaming-store decision
  Isa isa = Isa::kScalar;         // kernel level the tiles run at

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API SiluBackwardTiling silu_backward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                        const core::Platform& platform);

}  // namespace tilegrad::ops
