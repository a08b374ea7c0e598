// The reduction attribute on its way from an entry point to an operator's validation. The native
// API passes tilegrad::Reduction; the C ABI passes the vendor's forms: a string for cross entropy
// ("none" | "mean" | "sum", null meaning "mean") and an int64 code (0 none, 1 mean, 2 sum) for
// binary cross entropy. A value that is none of the three is kept together with its message, which
// require_valid raises (161002) at the attribute step of the validation order (specification section 0:
// after dtypes, ranks and shapes), so a call with several mistakes reports the same one whichever
// form it came in.
#pragma once

#include <cstdint>
#include <string>

#include "tilegrad/export.h"
#include "tilegrad/reduction.hpp"

namespace tilegrad::core {

struct ReductionArg {
  Reduction value = Reduction::kMean;
  std::string invalid;  // empty when valid, else the rule and the value: "must be ..., got ..."
  bool valid() const { return invalid.empty(); }
};

ReductionArg reduction_arg(Reduction r);  // native API: a value cast from outside the enum is invalid
// The vendor's forms (exported: the Python module parses its arguments with them too).
TILEGRAD_API ReductionArg reduction_from_name(const char* name);  // "none" | "mean" | "sum"; null = mean
TILEGRAD_API ReductionArg reduction_from_code(int64_t code);      // 0 none, 1 mean, 2 sum

// 161002 "<op>: reduction must be ..., got ..." unless r is valid.
void require_valid(const char* op, const ReductionArg& r);

const char* reduction_name(Reduction r);  // "none" | "mean" | "sum"

}  // namespace tilegrad::core
