// aclnnLayerNorm / aclnnLayerNormBackward tilings: core::RowTiling (core/row_tiling.h).
//
// Forward: one tile of consecutive rows per useful thread. Its workspace: weight then bias widened to
// fp32, then two scratch rows per tile when rows are packed (x, out).
// Backward: the rows cut into core::RowBlocks whose size depends only on the shape, one tile per block.
// A tile writes dx for its rows, sweep_rows rows per kernel call, and accumulates its dweight / dbias
// partials in row order (the sweep size changes no bit); the partials
// are then summed in block order, so both are bit-identical for every thread count. Its workspace:
// weight in fp32, dweight then dbias in fp32 before their store, the dweight partials then the dbias
// ones, three scratch rows per tile when rows are packed (dy, x, dx).
#pragma once

#include <cstdint>

#include "core/platform.h"
#include "core/row_tiling.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct LayerNormTiling : core::RowTiling {
  float* weight(char* workspace) const { return float_vector(workspace, 0); }        // N floats
  float* bias(char* workspace) const { return float_vector(workspace, 0) + cols; }   // N floats
};

TILEGRAD_API LayerNormTiling layer_norm_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                               bool out_dense, const core::Platform& platform);

struct LayerNormBackwardTiling : core::RowTiling {
  float* weight(char* workspace) const { return float_vector(workspace, 0); }  // N floats
  float* sums(char* workspace) const { return float_vector(workspace, 1); }    // dweight, then dbias: 2N floats
  char* weight_partials(char* workspace) const { return partials(workspace, 0); }
  char* bias_partials(char* workspace) const { return partials(workspace, 1); }
};

TILEGRAD_API LayerNormBackwardTiling layer_norm_backward_tiling(int64_t rows, int64_t cols, int64_t elem_bytes,
                                                                bool pack_rows, bool dx_dense,
                                                                const core::Platform& platform);

}  // namespace tilegrad::ops
