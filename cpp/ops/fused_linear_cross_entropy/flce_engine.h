// The block loops of the fused linear cross-entropy family, shared by the aclnn operators and the
// single-process fused op: GEMMs through oneDNN (core/gemm.h, always called outside our parallel
// regions), row kernels (fused_linear_cross_entropy_kernel.h) in parallel_for over row tiles.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/fused_linear_cross_entropy/fused_linear_cross_entropy_tiling.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// Element i of a 1-D strided view.
struct Vec1 {
  char* data = nullptr;
  DType dtype = DType::kUndefined;
  int64_t stride = 1;
  Vec1() = default;
  explicit Vec1(const TensorView& t)
      : data(static_cast<char*>(t.data)), dtype(t.dtype), stride(t.rank() >= 1 ? t.strides[0] : 1) {}
  char* ptr(int64_t i) const { return data + i * stride * dtype_size(dtype); }
  float f32(int64_t i) const {
    float v;
    std::memcpy(&v, ptr(i), 4);
    return v;
  }
  void set_f32(int64_t i, float v) const { std::memcpy(ptr(i), &v, 4); }
  int64_t integer(int64_t i) const {
    if (dtype == DType::kInt64) {
      int64_t v;
      std::memcpy(&v, ptr(i), 8);
      return v;
    }
    if (dtype == DType::kInt32) {
      int32_t v;
      std::memcpy(&v, ptr(i), 4);
      return v;
    }
    return static_cast<uint8_t>(*ptr(i));
  }
  void set_integer(int64_t i, int64_t v) const {
    if (dtype == DType::kInt64) std::memcpy(ptr(i), &v, 8);
    else {
      const int32_t w = static_cast<int32_t>(v);
      std::memcpy(ptr(i), &w, 4);
    }
  }
};

// True if oneDNN takes this 2-D view without a copy.
bool flce_gemmable(const TensorView& m);

// Forward blocks: max_out / sum_out get the row's max and sum-exp over this shard, pred_out
// L[i, local_target[i]] - max (0 where local_target[i] < 0); logits_out (optional) gets L rounded to
// its dtype.
void flce_forward_run(const FlceForwardTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* local_target, const Vec1& max_out, const Vec1& sum_out, const Vec1& pred_out,
                      const TensorView* logits_out, void* workspace);

// Gradient blocks. Per row: grad, max, sum_exp (unused with a softmax), target column (-1: none).
// softmax is null in memory-saving mode (t.recompute).
void flce_grad_run(const FlceGradTiling& t, const TensorView& input, const TensorView& weight,
                   const TensorView* softmax, const float* row_grad, const float* row_max, const float* row_sum,
                   const int64_t* row_target, const TensorView& grad_input, const TensorView& grad_weight,
                   void* workspace);

// Whole-logits path of the single-process op (three GEMMs instead of four): L = input @ weight^T
// into one (BT x V) fp32 buffer (workspace: flce_whole_workspace bytes; every operand oneDNN-ready),
// per row max / sum-exp / target logit - max (rows with target < 0: pred 0), then G formed in place
// over L (same row pitch, then packed densely), grad_input = G @ weight, grad_weight = G^T @ input.
uint64_t flce_whole_workspace(int64_t bt, int64_t v);
void flce_whole_run(int threads, Isa isa, const TensorView& input, const TensorView& weight, const int64_t* target,
                    const float* row_grad, float* row_max, float* row_sum, float* row_pred,
                    const TensorView& grad_input, const TensorView& grad_weight, void* workspace);

// Writes zeros into every element of a view.
void flce_fill_zero(const TensorView& t);

}  // namespace tilegrad::ops
