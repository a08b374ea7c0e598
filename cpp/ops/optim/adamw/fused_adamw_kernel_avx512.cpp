// AdamW kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"

// Correctly rounded square root (IEEE), the one operation AdamW needs beyond the simd:: interface.
namespace tilegrad::simd {
namespace {
inline VF sqrt(VF a) { return {_mm512_sqrt_ps(a.v)}; }
}  // namespace
}  // namespace tilegrad::simd

#include "ops/optim/adamw/fused_adamw_kernel.inc"
