// BCE-with-logits forward kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_kernel.inc"
