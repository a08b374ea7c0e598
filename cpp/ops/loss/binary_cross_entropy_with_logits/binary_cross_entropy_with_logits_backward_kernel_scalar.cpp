// BCE-with-logits backward kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_kernel.inc"
