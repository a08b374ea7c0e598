// aclnnRmsNorm row kernel for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/norm/rms_norm/rms_norm_kernel.inc"
