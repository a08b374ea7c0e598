// Rotary position embedding forward kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_kernel.inc"
