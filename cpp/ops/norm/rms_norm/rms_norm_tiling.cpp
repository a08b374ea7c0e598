#include "ops/norm/rms_norm/rms_norm_tiling.h"

namespace tilegrad::ops {

namespace {
constexpr core::RowOpNeeds kNeeds{
    "aclnnRmsNorm",
    core::RowSplit::kPerThread,
    2,                             // x read once (then again from L1 / L2), y written once
    {{{"workspace gamma", 1}}},    // gamma in fp32
    0,                             // no partials
    2,                             // scratch rows: x, y
};
}  // namespace

RmsNormTiling rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool y_dense,
                              const core::Platform& platform) {
  return {core::row_tiling(kNeeds, rows, cols, elem_bytes, pack_rows, y_dense, platform)};
}

}  // namespace tilegrad::ops
