// Embedding dense backward kernels for the scalar level (flags from cmake/TilegradFlags.cmake).
#define TILEGRAD_ISA scalar
#include "core/simd_scalar.h"
#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_kernel.inc"
