#include "ops/activation/gelu/gelu_tiling.h"

namespace tilegrad::ops {

GeluTiling gelu_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, const core::Platform& platform) {
  GeluTiling t;
  t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  return t;
}

void GeluTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}});
}

}  // namespace tilegrad::ops
