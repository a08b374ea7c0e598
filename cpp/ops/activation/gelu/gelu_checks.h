// Validation shared by the GELU operators: the float dtypes and the two forms of the `approximate`
// attribute (aclnnGeluV2's int64 0 / 1, aclnnGeluBackwardV2's "none" / "tanh"). Anything else is
// 161002 (the vendor's V2 forward maps every value but 1 to erf silently; tilegrad refuses them).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "core/error.h"
#include "tilegrad/gelu.hpp"

namespace tilegrad::ops::gelu_checks {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// The int64 code (aclnnGeluV2; the native API's enum, which a cast could fill with anything, as its
// code): true for tanh, false for erf.
inline bool is_tanh(const char* op, int64_t code) {
  core::check(code == 0 || code == 1, op, ": approximate must be 0 (none) or 1 (tanh), got ", code);
  return code == 1;
}

inline GeluApproximate approximate_from_name(const char* op, const char* name) {
  if (std::strcmp(name, "none") == 0) return GeluApproximate::kNone;
  if (std::strcmp(name, "tanh") == 0) return GeluApproximate::kTanh;
  core::fail(Status::kParamInvalid, op, ": approximate must be \"none\" or \"tanh\", got \"", name, "\"");
}

}  // namespace tilegrad::ops::gelu_checks
