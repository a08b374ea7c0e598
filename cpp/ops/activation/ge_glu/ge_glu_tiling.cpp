#include "ops/activation/ge_glu/ge_glu_tiling.h"

namespace tilegrad::ops {

GeGluTiling ge_glu_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, const core::Platform& platform) {
  GeGluTiling t;
  t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  return t;
}

void GeGluTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}});
}

}  // namespace tilegrad::ops
