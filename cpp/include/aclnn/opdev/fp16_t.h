/* op::fp16_t: the vendor's 2-byte IEEE half for host code (C++11). Constructible from any arithmetic
 * value (float, double, integers, bool) with one round-to-nearest-even step, and converts implicitly
 * to float (exact), so `float(x)`, `static_cast<double>(x)` and `std::cout << float(x)` work. The raw
 * bits are the public member `val`. Arithmetic between two fp16_t goes through float. */
#ifndef TILEGRAD_ACLNN_OPDEV_FP16_T_H_
#define TILEGRAD_ACLNN_OPDEV_FP16_T_H_

#include <cstdint>
#include <type_traits>

#include "aclnn/opdev/float_rounding.h"

namespace op {

struct fp16_t {
  uint16_t val;

  fp16_t() : val(0) {}
  template <class T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
  fp16_t(T value)  // NOLINT: implicit, as the vendor's
      : val(detail::half_bits_from_float_bits(detail::float_bits_round_to_odd(static_cast<double>(value)))) {}

  operator float() const { return detail::float_from_half_bits(val); }  // NOLINT: implicit, as the vendor's
  float to_float() const { return static_cast<float>(*this); }

  fp16_t& operator+=(float other) { return *this = fp16_t(static_cast<float>(*this) + other); }
  fp16_t& operator-=(float other) { return *this = fp16_t(static_cast<float>(*this) - other); }
  fp16_t& operator*=(float other) { return *this = fp16_t(static_cast<float>(*this) * other); }
  fp16_t& operator/=(float other) { return *this = fp16_t(static_cast<float>(*this) / other); }

  /* The value with the given bits. */
  static fp16_t from_bits(uint16_t bits) {
    fp16_t h;
    h.val = bits;
    return h;
  }
};

static_assert(sizeof(fp16_t) == 2, "fp16_t is 2 bytes, as aclDataType ACL_FLOAT16 elements");

}  // namespace op

#endif /* TILEGRAD_ACLNN_OPDEV_FP16_T_H_ */
