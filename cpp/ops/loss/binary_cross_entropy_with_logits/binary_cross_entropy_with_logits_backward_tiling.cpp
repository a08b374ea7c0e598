#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_tiling.h"

#include <algorithm>

namespace tilegrad::ops {

BceBackwardTiling bce_backward_tiling(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int64_t reduction,
                                      const core::Platform& platform) {
  BceBackwardTiling t;
  t.tiles = core::plan_elementwise(numel, bytes_per_elem, out_contiguous, platform);
  t.isa = platform.isa;
  // Mean divides by the number of elements of self, rounded once to fp32.
  t.scale = reduction == 1 ? static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(1, numel))) : 1.0f;
  return t;
}

void BceBackwardTiling::describe(core::FieldVisitor& v) const {
  tiles.describe(v);
  v.fields({{"isa", isa}, {"scale", scale}});
}

}  // namespace tilegrad::ops
