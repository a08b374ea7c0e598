// Cross-entropy forward kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/loss/cross_entropy/cross_entropy_loss_kernel.inc"
