#include "core/reduction.h"

#include <cstring>

#include "core/error.h"

namespace tilegrad::core {

ReductionArg reduction_from_code(int64_t code) {
  ReductionArg r;
  if (code >= 0 && code <= 2) r.value = static_cast<Reduction>(code);
  else r.invalid = "must be 0 (none), 1 (mean) or 2 (sum), got " + std::to_string(code);
  return r;
}

ReductionArg reduction_arg(Reduction r) { return reduction_from_code(static_cast<int64_t>(r)); }

ReductionArg reduction_from_name(const char* name) {
  ReductionArg r;
  if (name == nullptr || std::strcmp(name, "mean") == 0) r.value = Reduction::kMean;
  else if (std::strcmp(name, "sum") == 0) r.value = Reduction::kSum;
  else if (std::strcmp(name, "none") == 0) r.value = Reduction::kNone;
  else r.invalid = std::string("must be one of none, mean, sum, got '") + name + "'";
  return r;
}

void require_valid(const char* op, const ReductionArg& r) { check(r.valid(), op, ": reduction ", r.invalid); }

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kNone: return "none";
    case Reduction::kSum: return "sum";
    default: return "mean";
  }
}

}  // namespace tilegrad::core
