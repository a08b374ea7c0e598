// AdamW kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"

// Correctly rounded square root (IEEE), the one operation AdamW needs beyond the simd:: interface.
namespace tilegrad::simd {
namespace {
inline VF sqrt(VF a) { return {_mm256_sqrt_ps(a.v)}; }
}  // namespace
}  // namespace tilegrad::simd

#include "ops/optim/adamw/fused_adamw_kernel.inc"
