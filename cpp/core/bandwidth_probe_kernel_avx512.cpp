// Bandwidth probe span at the avx512 level.
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "core/bandwidth_probe_kernel.inc"
