// Platform: what a tiling is computed from. Tilings are pure functions of shapes and a Platform,
// so tests can pass any Platform (1..256 threads, other caches, another ISA) without the machine.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/runtime.hpp"

namespace tilegrad::core {

struct Platform {
  int threads = 1;
  int64_t l1_bytes = 32 << 10;   // per core
  int64_t l2_bytes = 1 << 20;    // per core
  int64_t l3_bytes = 32 << 20;   // shared
  Isa isa = Isa::kScalar;

  // This process: get_num_threads(), the caches sysconf reports (with sane fallbacks), active_isa().
  TILEGRAD_API static Platform current();
};

}  // namespace tilegrad::core
