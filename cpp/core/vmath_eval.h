// Evaluates one vector-math function over an array at a chosen ISA level (accuracy tests only).
#pragma once

#include <cstdint>
#include <string>

#include "core/dispatch.h"
#include "tilegrad/export.h"

namespace tilegrad::core {

enum class VmathFn : int { kExp = 0, kSigmoid = 1, kLog1p = 2, kLog1pUnit = 3 };

using VmathEvalFn = void (*)(VmathFn fn, const float* in, float* out, int64_t n);
void vmath_eval_scalar(VmathFn, const float*, float*, int64_t);
void vmath_eval_avx2(VmathFn, const float*, float*, int64_t);
void vmath_eval_avx512(VmathFn, const float*, float*, int64_t);

// name: "exp" | "sigmoid" | "log1p" | "log1p_unit"; runs at min(isa, detected ISA). Throws on an unknown name.
TILEGRAD_API void vmath_eval(const std::string& name, Isa isa, const float* in, float* out, int64_t n);

}  // namespace tilegrad::core
