#include "ops/norm/rms_norm/rms_norm_grad_tiling.h"

namespace tilegrad::ops {

namespace {
constexpr core::RowOpNeeds kNeeds{
    "aclnnRmsNormGrad",
    core::RowSplit::kShapeBlocks,
    3,                                                         // dy and x read once, dx written once
    {{{"workspace gamma", 1}, {"workspace dgamma", 1}}},       // gamma, dgamma in fp32
    1,                                                         // dgamma's partials
    4,                                                         // scratch rows: dy, x, dx, dresidual
};
}  // namespace

RmsNormGradTiling rms_norm_grad_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool dx_dense,
                                       const core::Platform& platform) {
  return {core::row_tiling(kNeeds, rows, cols, elem_bytes, pack_rows, dx_dense, platform)};
}

}  // namespace tilegrad::ops
