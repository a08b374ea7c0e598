// The whole tiling of an elementwise operator (SiLU backward, SwiGLU, GELU, GeGLU): the balanced
// split of its elements (core/elementwise.h's plan_elementwise) and the ISA the kernels run at. A pure
// function of the element count, the bytes an element moves, the output layout and the Platform.
#pragma once

#include <cstdint>

#include "core/elementwise.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::core {

struct ElementwiseOpTiling {
  ElementwiseTiling tiles;  // per-thread element ranges, streaming-store decision
  Isa isa = Isa::kScalar;   // kernel level the tiles run at

  // Its fields, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(FieldVisitor& v) const;
};

// numel: elements of the output (of one output, for several of one shape); bytes_per_elem: all bytes
// one such element moves (every input and output).
TILEGRAD_API ElementwiseOpTiling elementwise_op_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                                       const Platform& platform);

}  // namespace tilegrad::core
