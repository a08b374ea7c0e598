// Bandwidth probe span at the avx2 level.
#define TILEGRAD_ISA avx2
#include "core/simd_avx2.h"
#include "core/bandwidth_probe_kernel.inc"
