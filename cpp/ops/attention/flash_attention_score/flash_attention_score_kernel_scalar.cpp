// Flash attention block kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.inc"
