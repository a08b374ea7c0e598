// SiLU backward kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/activation/silu/silu_backward_kernel.inc"
