// Vector math written once over the simd:: interface (simd_scalar.h / simd_avx2.h / simd_avx512.h,
// whichever the including translation unit chose), so every ISA runs the same algorithm.
// No libm vector calls, no -ffast-math. Measured accuracy vs float64 (tests/test_vmath.py):
// exp <= 1.25 ulp, sigmoid <= 3.0 ulp, log1p <= 3.3 ulp, log1p_unit <= 2.9 ulp at every ISA (subnormal
// results in units of 2^-149; tests/test_vmath.py sweeps every 7th float32 bit pattern of each domain).
#pragma once

namespace tilegrad::simd {
namespace {

// exp(x): x = n*ln2 + r, |r| <= ln2/2; exp(r) by a degree-7 minimax-style polynomial (the
// classic Cephes expf coefficients); 2^n applied exactly. exp(-inf) = 0, exp(+inf) = inf, NaN kept.
// kNonPositive: the caller guarantees x <= 0 (or NaN), so the overflow clamp is skipped.
template <bool kNonPositive = false>
inline VF exp_impl(VF x) {
  if (!kNonPositive) x = min_nan_x(set1(89.0f), x);  // beyond these the result is inf / 0 anyway
  x = max_nan_x(set1(-105.0f), x);
  const VF n = round_nearest(x * set1(1.44269504088896341f));
  VF r = fma(n, set1(-0.693359375f), x);
  r = fma(n, set1(2.12194440e-4f), r);
  VF p = set1(1.9875691500e-4f);
  p = fma(p, r, set1(1.3981999507e-3f));
  p = fma(p, r, set1(8.3334519073e-3f));
  p = fma(p, r, set1(4.1665795894e-2f));
  p = fma(p, r, set1(1.6666665459e-1f));
  p = fma(p, r, set1(5.0000001201e-1f));
  p = fma(p, r * r, r + set1(1.0f));
  return scale2(p, n);
}

inline VF exp(VF x) { return exp_impl<false>(x); }

// The logistic sigmoid with its complement: z = exp(-|x|) never overflows, r = 1/(1+z), and
// s = sigmoid(x) = (x >= 0 ? r : z*r), c = 1 - s = (x >= 0 ? z*r : r) without cancellation, so both
// are accurate for every finite x.
struct SigmoidParts {
  VF s;  // sigmoid(x)
  VF c;  // 1 - sigmoid(x) = sigmoid(-x)
};

inline SigmoidParts sigmoid_parts(VF x) {
  const VF z = exp_impl<true>(neg(abs(x)));
  const VF r = recip(set1(1.0f) + z);
  const VF zr = z * r;
  const auto positive = ge(x, set1(0.0f));
  return {select(positive, r, zr), select(positive, zr, r)};
}

inline VF sigmoid(VF x) { return sigmoid_parts(x).s; }

// log1p(x): u = 1 + x = 2^k * m with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(f/(2+f)), f = m - 1,
// by its odd series; the rounding error of 1 + x is added back as (x - (u - 1)) / u.
// log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(inf) = inf, NaN kept.
inline VF log1p(VF x) {
  const VF one = set1(1.0f);
  const VF u = one + x;
  const VI k = sra(as_int(u) - as_int(set1(0.70710678f)), 23);
  const VF m = as_float(as_int(u) - sll(k, 23));
  const VF f = m - one;
  const VF s = f / (set1(2.0f) + f);
  const VF z = s * s;
  VF p = set1(1.0f / 9.0f);
  p = fma(p, z, set1(1.0f / 7.0f));
  p = fma(p, z, set1(1.0f / 5.0f));
  p = fma(p, z, set1(1.0f / 3.0f));
  p = fma(p, z, one);
  const VF log_m = (s + s) * p;
  const VF correction = (x - (u - one)) / u;
  const VF kf = to_float(k);
  VF r = fma(kf, set1(0.693145751953125f), fma(kf, set1(1.428606765330187e-06f), log_m + correction));
  r = select(eq(u, set1(0.0f)), set1(-__builtin_inff()), r);
  r = select(lt(x, set1(-1.0f)), set1(__builtin_nanf("")), r);
  r = select(eq(x, set1(__builtin_inff())), x, r);
  return select(isnan(x), x, r);
}

// log1p(z) for z in [0, 1] (or NaN), e.g. log1p(exp(-|x|)) in binary cross entropy with logits: the
// same series as log1p without its general-domain work. 1 + z = 2^k * m with k = 0 below sqrt(2) and
// 1 above, and f = m - 1 is taken from z itself (z, or (z - 1) / 2), so 1 + z is never rounded and
// needs no correction term (one division instead of two, no bit manipulation, no special cases:
// NaN propagates through the arithmetic). log1p_unit(0) = 0, log1p_unit(1) = ln 2.
inline VF log1p_unit(VF z) {
  const VF one = set1(1.0f);
  const auto upper = ge(z, set1(0.41421356f));  // 1 + z >= sqrt(2): k = 1, m = (1 + z) / 2
  const VF f = select(upper, (z - one) * set1(0.5f), z);
  // log(m) = 2 atanh(s), s = f / (2 + f), as d * p(d^2) with d = 2s (no underflow for subnormal z) and
  // the series' coefficients divided by the matching powers of 4 (exact).
  const VF d = (f + f) / (set1(2.0f) + f);
  const VF w = d * d;
  VF p = set1(1.0f / 9.0f / 256.0f);
  p = fma(p, w, set1(1.0f / 7.0f / 64.0f));
  p = fma(p, w, set1(1.0f / 5.0f / 16.0f));
  p = fma(p, w, set1(1.0f / 3.0f / 4.0f));
  p = fma(p, w, one);
  const VF log_m = d * p;
  const VF k = select(upper, one, set1(0.0f));
  return fma(k, set1(0.693145751953125f), fma(k, set1(1.428606765330187e-06f), log_m));
}

}  // namespace
}  // namespace tilegrad::simd
