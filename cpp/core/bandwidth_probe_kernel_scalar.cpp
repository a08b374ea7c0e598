// Bandwidth probe span at the scalar level.
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "core/bandwidth_probe_kernel.inc"
