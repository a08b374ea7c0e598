// Cross-entropy gradient kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_grad_kernel.inc"
