#include "ops/activation/silu/silu_backward_tiling.h"

namespace tilegrad::ops {

SiluBackwardTiling silu_backward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                        const core::Platform& platform) {
  SiluBackwardTiling t;
  t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  return t;
}

void SiluBackwardTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}});
}

}  // namespace tilegrad::ops
