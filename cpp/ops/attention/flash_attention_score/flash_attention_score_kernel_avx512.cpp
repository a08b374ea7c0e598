// Flash attention block kernels for the avx512 level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.inc"
