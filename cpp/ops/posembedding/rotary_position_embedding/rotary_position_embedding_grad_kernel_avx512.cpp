// Rotary position embedding gradient kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_kernel.inc"
