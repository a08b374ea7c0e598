/* op::bfloat16: the vendor's 2-byte bfloat16 for host code (C++11). Constructible from any arithmetic
 * value with one round-to-nearest-even step, converts implicitly to float (exact); raw bits in
 * `value`. Arithmetic between two bfloat16 goes through float. */
#ifndef TILEGRAD_ACLNN_OPDEV_BFLOAT16_H_
#define TILEGRAD_ACLNN_OPDEV_BFLOAT16_H_

#include <cstdint>
#include <type_traits>

#include "aclnn/opdev/float_rounding.h"

namespace op {

struct bfloat16 {
  uint16_t value;

  bfloat16() : value(0) {}
  template <class T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
  bfloat16(T v)  // NOLINT: implicit, as the vendor's
      : value(detail::bf16_bits_from_float_bits(detail::float_bits_round_to_odd(static_cast<double>(v)))) {}

  operator float() const { return detail::float_from_bf16_bits(value); }  // NOLINT: implicit, as the vendor's

  bfloat16& operator+=(float other) { return *this = bfloat16(static_cast<float>(*this) + other); }
  bfloat16& operator-=(float other) { return *this = bfloat16(static_cast<float>(*this) - other); }
  bfloat16& operator*=(float other) { return *this = bfloat16(static_cast<float>(*this) * other); }
  bfloat16& operator/=(float other) { return *this = bfloat16(static_cast<float>(*this) / other); }

  static bfloat16 from_bits(uint16_t bits) {
    bfloat16 b;
    b.value = bits;
    return b;
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 is 2 bytes, as aclDataType ACL_BF16 elements");

}  // namespace op

#endif /* TILEGRAD_ACLNN_OPDEV_BFLOAT16_H_ */
