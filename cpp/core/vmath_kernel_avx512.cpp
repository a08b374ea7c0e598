// Vector math evaluation at the avx512 level.
#define TILEGRAD_ISA avx512
#include "core/simd_avx512.h"
#include "core/vmath_kernel.inc"
