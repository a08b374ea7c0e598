// Per-ISA kernel selection. A kernel family is compiled once per ISA from one source (.inc)
// included by <op>_kernel_<isa>.cpp after the matching simd_<isa>.h; TILEGRAD_ISA_SYMBOL gives
// each copy its own name.
#pragma once

#include "tilegrad/runtime.hpp"

#define TILEGRAD_CAT_(a, b) a##_##b
#define TILEGRAD_CAT(a, b) TILEGRAD_CAT_(a, b)
#define TILEGRAD_ISA_SYMBOL(name) TILEGRAD_CAT(name, TILEGRAD_ISA)

namespace tilegrad::core {

template <class Fn>
struct KernelTable {
  Fn scalar, avx2, avx512;
  Fn pick(Isa isa) const {
    switch (isa) {
      case Isa::kAvx512: return avx512;
      case Isa::kAvx2: return avx2;
      default: return scalar;
    }
  }
};

}  // namespace tilegrad::core
