// aclnnAddRmsNorm's tiling: core::RowTiling (core/row_tiling.h), RMSNorm's plan (one tile of
// consecutive rows per useful thread, the same streaming-store threshold). What is AddRmsNorm's own:
// the workspace holds gamma widened to fp32, then two scratch rows per tile when rows are packed
// (x1's, which becomes xOut's, and x2's, which becomes y's).
#pragma once

#include <cstdint>

#include "core/platform.h"
#include "core/row_tiling.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct AddRmsNormTiling : core::RowTiling {
  float* gamma(char* workspace) const { return float_vector(workspace, 0); }  // N floats
};

// rows x cols of elem_bytes-sized x1; pack_rows: some operand's rows are not dense; y_dense: y's rows are.
TILEGRAD_API AddRmsNormTiling add_rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                                  bool y_dense, const core::Platform& platform);

}  // namespace tilegrad::ops
