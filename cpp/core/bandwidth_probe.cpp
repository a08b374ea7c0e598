#include "core/bandwidth_probe.h"

#include <algorithm>

#include "core/elementwise.h"
#include "core/parallel.h"
#include "core/platform.h"

namespace tilegrad::core {

void bandwidth_probe(float* out, const float* a, const float* b, int64_t n, bool streaming_stores) {
  const Platform p = Platform::current();
  const ElementwiseTiling t = plan_elementwise(n, 12, true, p);
  const StreamAddFn fn = KernelTable<StreamAddFn>{stream_add_scalar, stream_add_avx2, stream_add_avx512}.pick(p.isa);
  parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
    const int64_t begin = tile * t.tile_elems, end = std::min(n, begin + t.tile_elems);
    fn(out + begin, a + begin, b + begin, end - begin, streaming_stores);
  });
}

}  // namespace tilegrad::core
