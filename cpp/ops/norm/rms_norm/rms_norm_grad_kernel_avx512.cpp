// aclnnRmsNormGrad row kernel for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/norm/rms_norm/rms_norm_grad_kernel.inc"
