// Small rules shared by the tilings (pure functions of the work and the Platform).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/platform.h"

namespace tilegrad::core {

// Threads worth waking for `work_elems` elements of streaming work: below ~16K elements per
// thread, waking a thread costs more than it saves. At least 1, at most p.threads.
inline int64_t useful_threads(int64_t work_elems, const Platform& p) {
  constexpr int64_t kMinElemsPerThread = 16384;
  return std::min<int64_t>(std::max(p.threads, 1), std::max<int64_t>(1, work_elems / kMinElemsPerThread));
}

}  // namespace tilegrad::core
