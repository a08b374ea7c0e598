// Rotary position embedding forward kernels: a range of rows per call, the dtype and the mode fixed
// per instantiation (picked once per launch).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "ops/posembedding/rotary_position_embedding/rope_layout.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct RopeForwardArgs {
  int64_t dims[3] = {0, 0, 0};  // x's leading dims (rows are walked over them in row-major order)
  int64_t d = 0;                // last dim, contiguous in every operand
  RopeOperand x, cos, sin, y;
};

// Rows [begin, end) (linear over dims): y = x * cos + rotate(x) * sin, rounded once to the dtype.
using RopeForwardFn = void (*)(const RopeForwardArgs& args, int64_t begin, int64_t end);

// The kernel for one dtype (float32, float16, bfloat16), mode and store kind at one ISA level.
using RopeForwardPick = RopeForwardFn (*)(DType dtype, RopeMode mode, bool streaming_stores);
RopeForwardFn rope_forward_pick_scalar(DType, RopeMode, bool);
RopeForwardFn rope_forward_pick_avx2(DType, RopeMode, bool);
RopeForwardFn rope_forward_pick_avx512(DType, RopeMode, bool);

inline RopeForwardFn rope_forward_kernel(Isa isa, DType dtype, RopeMode mode, bool streaming_stores) {
  return core::KernelTable<RopeForwardPick>{rope_forward_pick_scalar, rope_forward_pick_avx2, rope_forward_pick_avx512}
      .pick(isa)(dtype, mode, streaming_stores);
}

}  // namespace tilegrad::ops
