// Vector math evaluation at the scalar level.
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "core/vmath_kernel.inc"
