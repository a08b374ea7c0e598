#include "ops/norm/layer_norm/layer_norm_tiling.h"

namespace tilegrad::ops {

namespace {
constexpr core::RowOpNeeds kForward{
    "aclnnLayerNorm",
    core::RowSplit::kPerThread,
    2,                                       // x read once (twice more from L1 / L2), out written once
    {{{"workspace weight and bias", 2}}},    // weight, bias in fp32
    0,                                       // no partials
    2,                                       // scratch rows: x, out
};

constexpr core::RowOpNeeds kBackward{
    "aclnnLayerNormBackward",
    core::RowSplit::kShapeBlocks,
    3,                                                                 // dy and x read once, dx written once
    {{{"workspace weight", 1}, {"workspace dweight and dbias", 2}}},   // weight; dweight, dbias in fp32
    2,                                                                 // dweight's partials, dbias's
    3,                                                                 // scratch rows: dy, x, dx
};
}  // namespace

LayerNormTiling layer_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows, bool out_dense,
                                  const core::Platform& platform) {
  return {core::row_tiling(kForward, rows, cols, elem_bytes, pack_rows, out_dense, platform)};
}

LayerNormBackwardTiling layer_norm_backward_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                                   bool dx_dense, const core::Platform& platform) {
  return {core::row_tiling(kBackward, rows, cols, elem_bytes, pack_rows, dx_dense, platform)};
}

}  // namespace tilegrad::ops
