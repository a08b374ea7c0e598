// Fused linear cross-entropy row kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.inc"
