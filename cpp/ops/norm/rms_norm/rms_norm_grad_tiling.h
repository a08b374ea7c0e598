// aclnnRmsNormGrad tiling: a pure function of the row count and length, the element size, the
// operands' layouts and the Platform. The rows are cut into core::RowBlocks (core/ordered_reduce.h),
// whose size depends only on the shape; one tile per block. A tile writes dx for its rows and
// accumulates its dgamma partial in row order; the partials are then summed in block order. So
// dgamma is bit-identical for every thread count.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/ordered_reduce.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct RmsNormGradTiling {
  int64_t rows = 0, cols = 0;        // R rows of N = numel(gamma)
  core::RowBlocks blocks;            // the tiles (one per block) and dgamma's summation order
  int threads = 1;                   // threads woken for the tiles and the final sum
  bool pack_rows = false;            // an operand's rows are not dense: gathered / scattered via scratch rows
  bool streaming_stores = false;     // dx written with non-temporal stores
  int64_t gamma_offset = 0;          // workspace: gamma widened to fp32 (N floats)
  int64_t dgamma_offset = 0;         // workspace: dgamma before a scatter into a non-dense dgammaOut (N floats)
  int64_t partials_offset = 0;       // workspace: the blocks' fp32 dgamma partials
  int64_t scratch_offset = 0;        // workspace: per-tile scratch rows (dy, x, dx, dresidual) when pack_rows
  int64_t scratch_row_bytes = 0;     // one scratch row (N elements), a multiple of 64 bytes
  int64_t scratch_bytes_per_tile = 0;
  int64_t workspace_bytes = 0;
  Isa isa = Isa::kScalar;

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API RmsNormGradTiling rms_norm_grad_tiling(int64_t rows, int64_t cols, int64_t elem_bytes, bool pack_rows,
                                                    bool dx_dense, const core::Platform& platform);

}  // namespace tilegrad::ops
