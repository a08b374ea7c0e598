// How a loss is reduced over its rows (or elements): one type for every loss operator of the
// native C++ API. The values are the vendor's int64 codes (aclnnBinaryCrossEntropyWithLogitsBackward's
// `reduction`); the cross-entropy C ABI spells them "none" | "mean" | "sum".
#pragma once

#include <cstdint>

namespace tilegrad {

enum class Reduction : int32_t {
  kNone = 0,  // one loss per row (or element)
  kMean = 1,  // the sum divided by the operator's divisor (see its header)
  kSum = 2,
};

}  // namespace tilegrad
