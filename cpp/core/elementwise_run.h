// Runs an elementwise launch: the tiles of an ElementwiseTiling in parallel, each tile's linear
// range split into contiguous spans by for_each_span (core/elementwise.h), so an operator's run()
// is one call. kernel(ptrs, n, streaming_stores) gets n contiguous elements per operand;
// streaming_stores is the tiling's decision, kept only where the output run is contiguous.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/elementwise.h"
#include "core/parallel.h"

namespace tilegrad::core {

template <class Kernel>
void run_elementwise(const ElementwiseLayout& layout, const ElementwiseTiling& t, Kernel&& kernel, int num_outputs = 1) {
  parallel_for(t.num_tiles, t.num_tiles, [&](int64_t tile) {
    const int64_t begin = tile * t.tile_elems;
    const int64_t end = std::min(t.numel, begin + t.tile_elems);
    for_each_span(layout, begin, end, [&](char* const* ptrs, int64_t n, bool contiguous_out) {
      kernel(ptrs, n, t.streaming_stores && contiguous_out);
    }, num_outputs);
  });
}

}  // namespace tilegrad::core
