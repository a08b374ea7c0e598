// Embedding dense backward (aclnnEmbeddingDenseBackward): the gradient of an embedding lookup with
// respect to its (num_weights, D) weight.
//   out[r, :] = sum over i with indices_flat[i] == r, r != padding_idx of grad_flat[i, :]
//               (divided by count(r) with scale_grad_by_freq); rows never hit are zero.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// grad: rank 2..8, fp32/fp16/bf16, leading dims' product == numel(indices). indices: rank 1..8,
// int64/int32/int16/int8/uint8/bool/fp32/fp16/fp64 (floats truncate toward zero). out:
// (num_weights, D), fp32/fp16/bf16 (any of them, whatever grad's dtype), any strides, not
// overlapping an input. padding_idx outside [0, num_weights) means no padding row. Each row is
// summed in index order in fp32 and rounded once: deterministic for any thread count.
// Throws tilegrad::Error: 161002 for invalid arguments, and (ErrorKind::kIndex) for an index < 0 or
// >= num_weights, naming the lowest such position and its value.
TILEGRAD_API void embedding_dense_backward(const TensorView& grad, const TensorView& indices, int64_t num_weights,
                                           int64_t padding_idx, bool scale_grad_by_freq, const TensorView& out);

// The out a call with these inputs needs by default: (num_weights, D) in grad's dtype. Validates
// the inputs like embedding_dense_backward.
TILEGRAD_API OutputSpec embedding_dense_backward_output_spec(const TensorView& grad, const TensorView& indices,
                                                             int64_t num_weights);

}  // namespace tilegrad
