// GELU and its derivative over the simd:: interface (include after one simd_<isa>.h and vmath.h),
// shared by the GELU and GeGLU families (specification sections 11 and 12). fp32 throughout.
//
// tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). Since 0.5 (1 + tanh(u)) =
//   sigmoid(2u), gelu = x * s with s = sigmoid(k), k = 2u, and gelu' = s + x s (1 - s) k'. Both come
//   from sigmoid_parts (no exp overflow; 1 - s without cancellation).
// erf form: x * Phi(x), Phi the standard normal CDF, gelu' = Phi(x) + x phi(x). For a = |x|,
//   Phi(-a) = E * R(a) with E = exp(-a^2 / 2) and R(a) = Phi(-a) exp(a^2 / 2), a smooth function
//   fitted (relative least squares, float64, by tilegrad) as a degree-10 polynomial in
//   t = 3 / (3 + a) over [0, 14.5] (fit error 8e-9 relative; ~2.5e-7 evaluated in fp32). a^2 is
//   split exactly (hi + lo by fma) so E keeps full relative accuracy however large a is; past
//   a = 14.5, E is 0 in fp32. Phi(x) = x < 0 ? E R : 1 - E R (E R <= 0.5: no cancellation), so
//   both tails are accurate: gelu(-10) = -7.7e-23 to a few ulp.
// At x = +-inf the forward is inf / NaN (x * Phi(x), as PyTorch and the vendor); the derivative's
// x-times-tail term is taken as 0 when it is inf * 0, so gelu'(+inf) = 1 and gelu'(-inf) = 0 (the
// vendor's kernel does the same); NaN stays NaN.
#pragma once

namespace tilegrad::simd {
namespace {

constexpr float kGeluK0 = 1.5957691216057308f;       // 2 sqrt(2/pi)
constexpr float kGeluK1 = 0.0713548162726009f;       // 2 sqrt(2/pi) * 0.044715
constexpr float kInvSqrt2Pi = 0.3989422804014327f;   // 1 / sqrt(2 pi)

// 0 where v is NaN (the inf * 0 of a tail term), v elsewhere.
inline VF zero_if_nan(VF v) { return select(isnan(v), set1(0.0f), v); }

// ---- tanh form ----

inline VF gelu_tanh(VF x) {
  const VF k = x * fma(set1(kGeluK1), x * x, set1(kGeluK0));
  return x * sigmoid(k);
}

// gelu(x) and gelu'(x) together, from one sigmoid (a backward that needs both: gelu_mul's).
struct GeluParts {
  VF value;  // gelu(x)
  VF grad;   // gelu'(x)
};

inline GeluParts gelu_tanh_parts(VF x) {
  const VF x2 = x * x;
  const VF k = x * fma(set1(kGeluK1), x2, set1(kGeluK0));
  const SigmoidParts sp = sigmoid_parts(k);
  // k' with x^2 capped: past |x| = 100, s * (1 - s) is exactly 0, and the cap keeps x k' finite.
  const VF dk = fma(set1(3.0f * kGeluK1), min_nan_x(set1(1e4f), x2), set1(kGeluK0));
  return {x * sp.s, sp.s + zero_if_nan((sp.s * sp.c) * (x * dk))};
}

inline VF gelu_tanh_grad(VF x) { return gelu_tanh_parts(x).grad; }

// ---- erf form ----

// Phi(-a) exp(a^2 / 2) for a in [0, 14.5] (NaN kept), as a polynomial in t = 3 / (3 + a).
inline VF normal_tail_ratio(VF a) {
  const VF t = set1(3.0f) / (set1(3.0f) + a);
  VF p = set1(-8.60640837e-04f);
  p = fma(p, t, set1(-2.26467177e-02f));
  p = fma(p, t, set1(1.41343951e-01f));
  p = fma(p, t, set1(-3.05319011e-01f));
  p = fma(p, t, set1(2.65323311e-01f));
  p = fma(p, t, set1(-9.02678892e-02f));
  p = fma(p, t, set1(1.38207093e-01f));
  p = fma(p, t, set1(1.06717400e-01f));
  p = fma(p, t, set1(1.34655952e-01f));
  p = fma(p, t, set1(1.32841542e-01f));
  return fma(p, t, set1(5.01606928e-06f));
}

struct NormalParts {
  VF cdf;  // Phi(x)
  VF pdf;  // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
};

inline NormalParts normal_parts(VF x) {
  const VF a = min_nan_x(set1(14.5f), abs(x));
  const VF hi = a * a;
  const VF lo = fma(a, a, neg(hi));  // a^2 = hi + lo exactly
  const VF e_hi = exp_impl<true>(hi * set1(-0.5f));
  const VF e = fma(e_hi, lo * set1(-0.5f), e_hi);  // exp(-(hi + lo) / 2), first order in lo
  const VF tail = e * normal_tail_ratio(a);        // Phi(-|x|)
  return {select(lt(x, set1(0.0f)), tail, set1(1.0f) - tail), e * set1(kInvSqrt2Pi)};
}

inline VF gelu_erf(VF x) { return x * normal_parts(x).cdf; }

inline GeluParts gelu_erf_parts(VF x) {
  const NormalParts np = normal_parts(x);
  return {x * np.cdf, np.cdf + zero_if_nan(x * np.pdf)};
}

inline VF gelu_erf_grad(VF x) { return gelu_erf_parts(x).grad; }

// The form chosen once per launch (approximate: false = erf, true = tanh).
template <bool kTanh>
inline VF gelu(VF x) {
  if constexpr (kTanh) return gelu_tanh(x);
  else return gelu_erf(x);
}

template <bool kTanh>
inline VF gelu_grad(VF x) {
  if constexpr (kTanh) return gelu_tanh_grad(x);
  else return gelu_erf_grad(x);
}

template <bool kTanh>
inline GeluParts gelu_parts(VF x) {
  if constexpr (kTanh) return gelu_tanh_parts(x);
  else return gelu_erf_parts(x);
}

}  // namespace
}  // namespace tilegrad::simd
