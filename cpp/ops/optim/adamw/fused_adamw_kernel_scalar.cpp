// AdamW kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"

// Correctly rounded square root (IEEE), the one operation AdamW needs beyond the simd:: interface.
namespace tilegrad::simd {
namespace {
inline VF sqrt(VF a) { return {std::sqrt(a.v)}; }
}  // namespace
}  // namespace tilegrad::simd

#include "ops/optim/adamw/fused_adamw_kernel.inc"
