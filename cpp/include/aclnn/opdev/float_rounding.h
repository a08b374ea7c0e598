/* Rounding helpers shared by opdev/fp16_t.h and opdev/bfloat16.h (C++11, header-only): IEEE binary16
 * and bfloat16 from double with round-to-nearest-even, and back to float exactly. */
#ifndef TILEGRAD_ACLNN_OPDEV_FLOAT_ROUNDING_H_
#define TILEGRAD_ACLNN_OPDEV_FLOAT_ROUNDING_H_

#include <cstdint>
#include <cstring>

namespace op {
namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/* double -> float bits rounded to odd: truncate toward zero, then set the last bit when anything was
 * dropped. Rounding that result once more to a format at least 2 bits narrower (half: 13 fewer,
 * bfloat16: 16 fewer) gives the correctly rounded value of the double, with no double rounding. */
inline uint32_t float_bits_round_to_odd(double d) {
  float f = static_cast<float>(d);
  uint32_t u = float_bits(f);
  const double back = static_cast<double>(f);
  if (back != d && d == d) {
    if ((back > d) == (d > 0)) --u;  // |f| > |d|: step back toward zero (same sign, so bits - 1)
    u |= 1u;
  }
  return u;
}

/* float bits -> IEEE binary16 bits, round-to-nearest-even; NaN stays (quiet) NaN. */
inline uint16_t half_bits_from_float_bits(uint32_t u) {
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  /* rounds to >= 65520: inf */
  if (a >= 0x38800000u) {                                              /* normal half */
    const uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  /* Subnormal or zero: units of 2^-24, the float's 24-bit significand shifted right with RNE. */
  const uint32_t exp = a >> 23;
  if (exp < 102) return static_cast<uint16_t>(sign);  /* below 2^-25: rounds to zero */
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;                  /* 14..24 */
  uint32_t m = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t half_way = 1u << (shift - 1);
  if (rest > half_way || (rest == half_way && (m & 1u))) ++m;
  return static_cast<uint16_t>(sign | m);
}

inline float float_from_half_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  if (exp != 0) return float_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  return float_from_bits(sign | float_bits(static_cast<float>(mant) * 5.9604644775390625e-8f));
}

/* float bits -> bfloat16 bits, round-to-nearest-even; NaN stays (quiet) NaN. */
inline uint16_t bf16_bits_from_float_bits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float float_from_bf16_bits(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

}  // namespace detail
}  // namespace op

#endif /* TILEGRAD_ACLNN_OPDEV_FLOAT_ROUNDING_H_ */
