// Rotary position embedding gradient kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_kernel.inc"
