// parallel_for over tiles: the only place tilegrad uses OpenMP (parallel.cpp). Tiles are handed out
// statically in order, so which thread runs a tile never changes a result.
#pragma once

#include <cstdint>
#include <utility>

namespace tilegrad::core {

using TileFn = void (*)(void* ctx, int64_t tile);

// Runs fn(ctx, t) for t in [0, num_tiles) on up to num_threads threads (inline when 1). An
// exception thrown by a tile is rethrown on the calling thread after all tiles finish.
void parallel_for_tiles(int64_t num_tiles, int num_threads, TileFn fn, void* ctx);

template <class F>
void parallel_for(int64_t num_tiles, int num_threads, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_for_tiles(
      num_tiles, num_threads, [](void* ctx, int64_t t) { (*static_cast<Fn*>(ctx))(t); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// True inside an OpenMP parallel region (nested calls then run inline).
bool in_parallel_region();

}  // namespace tilegrad::core
