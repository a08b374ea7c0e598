#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

namespace tilegrad::core {

void parallel_for_tiles(int64_t num_tiles, int num_threads, TileFn fn, void* ctx) {
  if (num_tiles <= 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(std::max(num_threads, 1), num_tiles));
  if (threads == 1 || omp_in_parallel()) {
    for (int64_t t = 0; t < num_tiles; ++t) fn(ctx, t);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < num_tiles; ++t) {
    try {
      fn(ctx, t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

bool in_parallel_region() { return omp_in_parallel(); }

}  // namespace tilegrad::core
