// Fused linear cross-entropy row kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.inc"
