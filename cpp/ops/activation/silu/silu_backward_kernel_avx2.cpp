// SiLU backward kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/activation/silu/silu_backward_kernel.inc"
