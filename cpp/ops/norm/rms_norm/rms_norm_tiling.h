// aclnnRmsNorm's (and aclnnGemmaRmsNorm's) tiling: core::RowTiling (core/row_tiling.h), one tile of
// consecutive rows per useful thread. What is RMSNorm's own: the workspace holds gamma widened to fp32,
// then two scratch rows per tile when rows are packed (x and y).
#pragma once

#include <cstdint>

#include "core/platform.h"
#include "core/row_tiling.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct RmsNormTiling : core::RowTiling {
  float* gamma(char* workspace) const { return float_vector(workspace, 0); }  // N floats
};

// rows x cols of elem_bytes-sized x; pack_rows: some operand's rows are not dense; y_dense: y's rows are.
TILEGRAD_API RmsNormTiling rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool y_dense,
                                           const core::Platform& platform);

}  // namespace tilegrad::ops
