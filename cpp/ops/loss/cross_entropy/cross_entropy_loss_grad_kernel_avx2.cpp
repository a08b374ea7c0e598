// Cross-entropy gradient kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_grad_kernel.inc"
