// AdamW span kernels (shared by aclnnFusedAdamw and aclnnApplyAdamWV2): one contiguous span of one
// parameter per call, every operand in its own dtype, arithmetic in fp32, each result rounded once.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::adamw {

// Operand order everywhere: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, param16 (the optional
// 16-bit copy of the updated param that the master-weights path writes).
enum Operand : int { kParam = 0, kGrad, kExpAvg, kExpAvgSq, kMaxExpAvgSq, kParam16, kNumOperands };

struct Dtypes {
  DType d[kNumOperands] = {DType::kUndefined, DType::kUndefined, DType::kUndefined,
                           DType::kUndefined, DType::kUndefined, DType::kUndefined};
};

// Per-parameter constants, fp32 values rounded once from double (as torch.optim.AdamW's Python
// floats are when they meet an fp32 tensor).
struct Scalars {
  float gmul = 1;    // grad multiplier: -1 for maximize, times 1/gradScale, times the clip coefficient
  float decay = 1;   // 1 - lr * weight_decay
  float w = 0.1f;    // 1 - beta1: the lerp weight of exp_avg
  float b2 = 0.999f, omb2 = 0.001f;  // beta2, 1 - beta2
  float bc2s = 1;    // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float nss = -1e-3f;  // -lr / (1 - beta1^t)
  bool amsgrad = false;
  bool write_param16 = false;
};

// ptrs[k] points at n contiguous elements of operand k in dtypes.d[k] (unused operands: nullptr).
using SpanFn = void (*)(const Dtypes& dtypes, char* const* ptrs, int64_t n, const Scalars& s);
// Sum of squares of n contiguous grad elements: 16 fixed fp32 lanes over blocks of 256 elements,
// accumulated into 16 double lanes, added in a fixed tree: the same value on every ISA.
using SumSqFn = double (*)(DType dtype, const char* grad, int64_t n);

void adamw_span_scalar(const Dtypes&, char* const*, int64_t, const Scalars&);
void adamw_span_avx2(const Dtypes&, char* const*, int64_t, const Scalars&);
void adamw_span_avx512(const Dtypes&, char* const*, int64_t, const Scalars&);
double adamw_sumsq_scalar(DType, const char*, int64_t);
double adamw_sumsq_avx2(DType, const char*, int64_t);
double adamw_sumsq_avx512(DType, const char*, int64_t);

inline SpanFn adamw_span_kernel(Isa isa) {
  return core::KernelTable<SpanFn>{adamw_span_scalar, adamw_span_avx2, adamw_span_avx512}.pick(isa);
}
inline SumSqFn adamw_sumsq_kernel(Isa isa) {
  return core::KernelTable<SumSqFn>{adamw_sumsq_scalar, adamw_sumsq_avx2, adamw_sumsq_avx512}.pick(isa);
}

}  // namespace tilegrad::ops::adamw
