// GELU tiling (forward and gradient): elementwise (core/elementwise.h), a pure function of the element
// count, the bytes an element moves, the output layout and the Platform.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct GeluTiling {
  core::ElementwiseTiling tiles;  // per-thread element ranges, streaming-store decision
  Isa isa = Isa::kScalar;         // kernel level the tiles run at

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// numel: elements of the output; bytes_per_elem: all bytes one output element moves (inputs + output).
TILEGRAD_API GeluTiling gelu_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                    const core::Platform& platform);

}  // namespace tilegrad::ops
