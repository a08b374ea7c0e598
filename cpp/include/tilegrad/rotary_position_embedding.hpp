// Rotary position embedding (aclnnRotaryPositionEmbedding, aclnnRotaryPositionEmbeddingGrad):
// y = x * cos + rotate(x) * sin over the last dim D of 4-D tensors, rotate chosen by `mode`:
//   0 half (Hugging Face rotate_half: cat(-x2, x1) of the two halves), 1 interleave (GPT-J / Meta:
//   pairs (2i, 2i+1) -> (-x[2i+1], x[2i])), 2 quarter (half mode within each half of D),
//   3 interleave-half (x's even / odd elements first gathered into halves, then half mode).
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// x, cos, sin and out 4-D of one dtype (float32, float16, bfloat16); cos and sin one shape whose
// leading dims are each 1 or x's and whose last dim is x's (even; a multiple of 4 in mode 2; at most
// 1024); out has x's shape and may be x itself (in place). Any strides.
// Throws tilegrad::Error: 161001 / 161002 (dtypes, overlapping output), 561002 (ranks, shapes, mode).
TILEGRAD_API void rotary_position_embedding(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                            int64_t mode, const TensorView& out);

// The out a call with these inputs needs (x's dtype and shape). Validates the inputs like
// rotary_position_embedding.
TILEGRAD_API OutputSpec rotary_position_embedding_output_spec(const TensorView& x, const TensorView& cos,
                                                              const TensorView& sin, int64_t mode);

// The gradient: dx (dy's shape) from dy, cos and sin; when x is given (not TensorView{}), also
// dcos = sum(dy * x) and dsin = sum(dy * rotate(x)) over the dims where cos / sin broadcast over dy,
// in cos's shape. dcos and dsin may be absent (TensorView{}) when x is; when x is absent and they
// are given, they are checked and left untouched (the vendor's contract). All tensors 4-D of one
// dtype; dx may be dy itself (in place). The sums have a fixed order: the same bits for any
// thread count.
TILEGRAD_API void rotary_position_embedding_grad(const TensorView& dy, const TensorView& cos, const TensorView& sin,
                                                 const TensorView& x, int64_t mode, const TensorView& dx,
                                                 const TensorView& dcos, const TensorView& dsin);

}  // namespace tilegrad
