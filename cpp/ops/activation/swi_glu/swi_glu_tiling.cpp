#include "ops/activation/swi_glu/swi_glu_tiling.h"

namespace tilegrad::ops {

SwiGluTiling swi_glu_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, const core::Platform& platform) {
  SwiGluTiling t;
  t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  return t;
}

void SwiGluTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}});
}

}  // namespace tilegrad::ops
