#include "ops/norm/add_rms_norm/add_rms_norm_tiling.h"

namespace tilegrad::ops {

namespace {
constexpr core::RowOpNeeds kNeeds{
    "aclnnAddRmsNorm",
    core::RowSplit::kPerThread,
    2,                             // RMSNorm's threshold: y streamed once x1's and y's bytes exceed half the L3
    {{{"workspace gamma", 1}}},    // gamma in fp32
    0,                             // no partials
    2,                             // scratch rows: x1 / xOut, x2 / y
};
}  // namespace

AddRmsNormTiling add_rms_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool y_dense,
                                     const core::Platform& platform) {
  return {core::row_tiling(kNeeds, rows, cols, elem_bytes, pack_rows, y_dense, platform)};
}

}  // namespace tilegrad::ops
