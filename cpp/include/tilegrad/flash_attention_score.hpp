// Flash attention forward and backward (aclnnFlashAttentionScore, aclnnFlashAttentionScoreGrad), per
// batch b and query head n (kv head n / G, G = N1 / N2 query heads per kv head):
//   S = scale * Q K^T, masked positions excluded, P = softmax(S) per row, O = P V
//   softmaxMax = rowmax(S), softmaxSum = sum(exp(S - max)), both fp32 [B, N1, Sq, 8] (value in every lane)
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q
// A fully masked row gives O = 0, max = -FLT_MAX, sum = +FLT_MAX and zero gradients.
#pragma once

#include <cstdint>
#include <string>

#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad {

// The vendor's scalar arguments. preTokens / nextTokens default to INT32_MAX (no band), as the vendor's.
struct FlashAttentionOptions {
  double scale_value = 1.0;
  double keep_prob = 1.0;                // only 1 is supported (no dropout) for now
  int64_t pre_tokens = 2147483647;
  int64_t next_tokens = 2147483647;
  int64_t head_num = 0;                  // N1, > 0
  std::string input_layout = "BSH";      // BSH, SBH, BSND or BNSD
  int64_t inner_precise = 0;             // reserved (fully masked rows are always exact)
  int64_t sparse_mode = 0;               // 0 .. 4
};

struct FlashAttentionScoreOutputSpecs {
  OutputSpec softmax_max, softmax_sum;   // float32 [B, N1, Sq, 8]
  OutputSpec attention_out;              // query's shape with D replaced by Dv, query's dtype
};
struct FlashAttentionScoreGradOutputSpecs {
  OutputSpec dq, dk, dv;                 // the shapes and dtype of query, key, value
};

// q, k, v: one dtype (float32, float16, bfloat16) in input_layout; atten_mask: optional bool/uint8,
// 1 = masked, [B,N1,Sq,Skv], [B,1,Sq,Skv], [1,1,Sq,Skv] or [Sq,Skv] (sparse modes 0, 1) or the
// 2048 x 2048 template (modes 2, 3, 4; its contents are not read). pse and drop_mask must be absent
// (TensorView{}). Any strides. Throws tilegrad::Error.
TILEGRAD_API void flash_attention_score(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& pse, const TensorView& drop_mask,
                                        const TensorView& atten_mask, const FlashAttentionOptions& options,
                                        const TensorView& softmax_max, const TensorView& softmax_sum,
                                        const TensorView& attention_out);
TILEGRAD_API FlashAttentionScoreOutputSpecs flash_attention_score_output_specs(const TensorView& q,
                                                                               const TensorView& k,
                                                                               const TensorView& v,
                                                                               const FlashAttentionOptions& options);

// The forward's inputs and options, dy (attention_in's shape and dtype), the forward's softmax_max,
// softmax_sum (lane 0 is read) and attention_in (its output). dq, dk, dv are overwritten.
TILEGRAD_API void flash_attention_score_grad(const TensorView& q, const TensorView& k, const TensorView& v,
                                             const TensorView& dy, const TensorView& pse,
                                             const TensorView& drop_mask, const TensorView& atten_mask,
                                             const TensorView& softmax_max, const TensorView& softmax_sum,
                                             const TensorView& attention_in, const FlashAttentionOptions& options,
                                             const TensorView& dq, const TensorView& dk, const TensorView& dv);
TILEGRAD_API FlashAttentionScoreGradOutputSpecs flash_attention_score_grad_output_specs(
    const TensorView& q, const TensorView& k, const TensorView& v);

}  // namespace tilegrad
