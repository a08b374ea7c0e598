// c * exp(x) + a over the simd:: interface (include after one simd_<isa>.h), for kernels with one
// scale c per row (the cross-entropy forward and gradient). Built for log-probabilities and shifted
// logits (x <= 0), safe for any x:
//   x = n ln2 + r, |r| <= ln2/2, n from the shifter trick (t = x log2e + 1.5*2^23 + 127 leaves n + 127
//   in t's low bits, so 2^n = as_float((n + 127) << 23) costs one integer shift); r = x - n fl(ln2) in one
//   fma (|fl(ln2) - ln2| = 1.9e-9, so this adds |n| * 1.9e-9 relative: <= 6e-8 for x >= -20, where
//   the terms that matter are, and 2.4e-7 at the underflow end); exp(r) = 1 + r q(r)
//   with a minimax q whose coefficients are pre-multiplied by c once per row. Measured relative error
//   of exp: degree 5 2.0e-7 for x >= -20, 3.8e-7 down to -87 (fp32 results); degree 4 3e-6 (fp16/bf16
//   results, below a quarter of their rounding step); degree 3 1.0e-4 (bf16 results free of
//   cancellation: 1.2% of them round the other way, always within one bf16 ulp of exact).
//   x is clamped to [-88, 88.7]: x <= -88 (and -inf) gives
//   exactly a (exp below 2^-126 flushes to 0), x >= 88.4 gives inf, NaN propagates. Compared with
//   exp (vmath.h) this moves the 2^n scaling and the clamps off the FMA pipes: 3 + degree
//   multiply-adds per vector instead of 12.
#pragma once

namespace tilegrad::simd {
namespace {

// NonPositive: the caller guarantees x <= 0 or NaN (x minus its row maximum), so the upper clamp is skipped.
template <int Degree, bool NonPositive = false>
struct ScaledExp {
  static_assert(Degree >= 3 && Degree <= 5, "fitted degrees: 3, 4 and 5");
  simd::VF k[Degree + 1];

  explicit ScaledExp(float c) {
    // exp(r) ~ 1 + k1 r + ... + kD r^D on [-ln2/2, ln2/2] (relative minimax, Lawson-fitted).
    static constexpr float kCoef5[6] = {1.0f, 9.9999970198e-01f, 4.9999147654e-01f, 1.6667638719e-01f,
                                        4.1898161173e-02f, 8.2902722061e-03f};
    static constexpr float kCoef4[5] = {1.0f, 9.9996680021e-01f, 5.0003021955e-01f, 1.6787591577e-01f,
                                        4.1513685137e-02f};
    static constexpr float kCoef3[4] = {1.0f, 1.0001962185e+00f, 5.0413453579e-01f, 1.6517829895e-01f};
    const float* coef = Degree == 5 ? kCoef5 : Degree == 4 ? kCoef4 : kCoef3;
    for (int i = 0; i <= Degree; ++i) k[i] = simd::set1(c * coef[i]);
  }

  simd::VF operator()(simd::VF x, simd::VF addend) const {
    using namespace simd;
    constexpr float kShifter = 12583039.0f;  // 1.5 * 2^23 + 127
    if (!NonPositive) x = min_nan_x(set1(88.7f), x);
    x = max_nan_x(set1(-88.0f), x);
    const VF t = fma(x, set1(1.44269504088896341f), set1(kShifter));
    const VF n = t - set1(kShifter);
    const VF r = fma(n, set1(-0.693147182f), x);
    VF p = k[Degree];
    for (int i = Degree - 1; i >= 0; --i) p = fma(p, r, k[i]);
    return fma(p, as_float(sll(as_int(t), 23)), addend);
  }
};

}  // namespace
}  // namespace tilegrad::simd
