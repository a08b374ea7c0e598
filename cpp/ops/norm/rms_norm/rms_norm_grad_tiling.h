// aclnnRmsNormGrad's tiling (also AddRmsNorm's backward): core::RowTiling (core/row_tiling.h), the
// rows cut into core::RowBlocks whose size depends only on the shape, one tile per block. A tile
// writes dx for its rows and accumulates its dgamma partial in row order; the partials are then summed
// in block order, so dgamma is bit-identical for every thread count. What is RMSNormGrad's own: the
// workspace holds gamma and dgamma in fp32 (dgamma before a scatter into a non-dense dgammaOut), one
// set of dgamma partials, and four scratch rows per tile when rows are packed (dy, x, dx, dresidual).
#pragma once

#include <cstdint>

#include "core/platform.h"
#include "core/row_tiling.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct RmsNormGradTiling : core::RowTiling {
  float* gamma(char* workspace) const { return float_vector(workspace, 0); }   // N floats
  float* dgamma(char* workspace) const { return float_vector(workspace, 1); }  // N floats
};

TILEGRAD_API RmsNormGradTiling rms_norm_grad_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                                    bool dx_dense, const core::Platform& platform);

}  // namespace tilegrad::ops
