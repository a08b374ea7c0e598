// BCE-with-logits backward kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_kernel.inc"
