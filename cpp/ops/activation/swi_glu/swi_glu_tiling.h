// aclnnSwiGlu / aclnnSwiGluGrad tiling: elementwise over the halves (core/elementwise.h), a pure
// function of the half's element count, the bytes an element moves, the output layout and the Platform.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct SwiGluTiling {
  core::ElementwiseTiling tiles;  // per-thread ranges over the half's elements, streaming-store decision
  Isa isa = Isa::kScalar;

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// numel: elements of one half (= of the forward's out, of the grad's yGrad); bytes_per_elem: all
// bytes one such element moves (forward: a, b, out; grad: dy, a, b, da, db).
TILEGRAD_API SwiGluTiling swi_glu_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                         const core::Platform& platform);

}  // namespace tilegrad::ops
