// Flash attention block kernels for the avx2 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.inc"
