// aclnnRmsNorm row kernel for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/norm/rms_norm/rms_norm_kernel.inc"
