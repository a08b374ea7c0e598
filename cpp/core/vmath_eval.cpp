#include "core/vmath_eval.h"

#include <algorithm>

#include "core/error.h"

namespace tilegrad::core {

void vmath_eval(const std::string& name, Isa isa, const float* in, float* out, int64_t n) {
  VmathFn fn;
  if (name == "exp") fn = VmathFn::kExp;
  else if (name == "sigmoid") fn = VmathFn::kSigmoid;
  else if (name == "log1p") fn = VmathFn::kLog1p;
  else if (name == "log1p_unit") fn = VmathFn::kLog1pUnit;
  else fail(Status::kParamInvalid, "vmath_eval: function must be one of {exp, sigmoid, log1p, log1p_unit}, got '", name,
            "'");
  KernelTable<VmathEvalFn>{vmath_eval_scalar, vmath_eval_avx2, vmath_eval_avx512}
      .pick(std::min(isa, detected_isa()))(fn, in, out, n);
}

}  // namespace tilegrad::core
