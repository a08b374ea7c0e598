#include "core/elementwise_op_tiling.h"

namespace tilegrad::core {

ElementwiseOpTiling elementwise_op_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous,
                                          const Platform& platform) {
  ElementwiseOpTiling t;
  t.tiles = plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  return t;
}

void ElementwiseOpTiling::describe(FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}});
}

}  // namespace tilegrad::core
