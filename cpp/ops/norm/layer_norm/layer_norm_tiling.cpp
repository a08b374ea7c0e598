#include "ops/norm/layer_norm/layer_norm_tiling.h"

#include <algorithm>

#include "ops/norm/layer_norm/layer_norm_backward_kernel.h"

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
  LayerNormBackwardTiling t{core::row_tiling(kBackward, rows, cols, elem_bytes, pack_rows, dx_dense, platform)};
  // a sweep's dy and x rows take at most a quarter of L2, so they are still there for the parameter sums
  const int64_t row_pair_bytes = std::max<int64_t>(1, 2 * cols * elem_bytes);
  if (!pack_rows)
    t.sweep_rows = std::clamp<int64_t>(platform.l2_bytes / 4 / row_pair_bytes, 1, LayerNormBackwardSweep::kMaxRows);
  return t;
}

void LayerNormBackwardTiling::describe(core::FieldVisitor& v) const {
  RowTiling::describe(v);
  v.fields({{"sweep_rows", sweep_rows}});
}

}  // namespace tilegrad::ops
