// aclnnSwiGluGrad kernel for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/activation/swi_glu/swi_glu_grad_kernel.inc"
