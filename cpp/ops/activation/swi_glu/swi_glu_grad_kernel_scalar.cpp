// aclnnSwiGluGrad kernel for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/activation/swi_glu/swi_glu_grad_kernel.inc"
