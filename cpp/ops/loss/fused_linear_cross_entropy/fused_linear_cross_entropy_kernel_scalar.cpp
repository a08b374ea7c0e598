// Fused linear cross-entropy row kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.inc"
