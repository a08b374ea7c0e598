// Rotary position embedding gradient kernels, the dtype and the mode fixed per instantiation (picked
// once per launch): dx over a range of rows; dx plus the dcos / dsin accumulators over one row; the
// accumulators rounded into dcos / dsin rows.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "ops/posembedding/rotary_position_embedding/rope_layout.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct RopeGradArgs {
  int64_t dims[3] = {0, 0, 0};  // dy's leading dims (rows are walked over them in row-major order)
  int64_t d = 0;                // last dim, contiguous in every operand
  RopeOperand dy, cos, sin, x, dx;
};

// Rows [begin, end): dx_first = cos_first dy_first + sin_second dy_second,
//                    dx_second = cos_second dy_second - sin_first dy_first.
using RopeGradDxFn = void (*)(const RopeGradArgs& args, int64_t begin, int64_t end);
// One row (each pointer at its row; x and dx may be the same row only if dx is dy): dx as above,
// and acc[0, d) += dy * x, acc[d, 2d) += dy * rotate(x) in fp32, both in the planar pair layout
// of the mode's blocks (for the interleave mode: first elements, then second elements).
using RopeGradRowFn = void (*)(const char* dy, const char* cos, const char* sin, const char* x, char* dx, int64_t d,
                               float* acc);
// acc (2d floats, as above) rounded once into a dcos row and a dsin row of the dtype, cos's layout.
using RopeGradStoreFn = void (*)(const float* acc, int64_t d, char* dcos, char* dsin);

struct RopeGradKernels {
  RopeGradDxFn dx = nullptr;         // ordinary stores
  RopeGradDxFn dx_stream = nullptr;  // non-temporal stores (rows and partners 64-byte aligned)
  RopeGradRowFn row = nullptr;
  RopeGradStoreFn store = nullptr;
};

using RopeGradPick = RopeGradKernels (*)(DType dtype, RopeMode mode);
RopeGradKernels rope_grad_pick_scalar(DType, RopeMode);
RopeGradKernels rope_grad_pick_avx2(DType, RopeMode);
RopeGradKernels rope_grad_pick_avx512(DType, RopeMode);

inline RopeGradKernels rope_grad_kernels(Isa isa, DType dtype, RopeMode mode) {
  return core::KernelTable<RopeGradPick>{rope_grad_pick_scalar, rope_grad_pick_avx2, rope_grad_pick_avx512}.pick(isa)(
      dtype, mode);
}

}  // namespace tilegrad::ops
