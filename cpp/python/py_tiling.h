// Tiling test hooks: any tiling as a Python dict of the fields its describe() lists (core/describe.h),
// the same list the TILEGRAD_VERBOSE trace prints.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "core/describe.h"
#include "py_tensor.h"

namespace tilegrad::py_support {

class DictVisitor final : public core::FieldVisitor {
 public:
  pybind11::dict dict;

 protected:
  void on_int(const char* name, int64_t v) override { dict[name] = v; }
  void on_bool(const char* name, bool v) override { dict[name] = v; }
  void on_real(const char* name, double v) override { dict[name] = v; }
  void on_word(const char* name, const char* v) override { dict[name] = v; }
};

template <class Tiling>
pybind11::dict tiling_dict(const Tiling& tiling) {
  DictVisitor v;
  tiling.describe(v);
  return v.dict;
}

// Defines the tiling test hook `name`(op_args..., threads, l1_bytes, l2_bytes, l3_bytes, isa): the dict
// of tiling(op_args..., platform) on a simulated machine. OpArgs are given explicitly, op_arg_names
// (py::arg) name them; the machine's parameters follow with this machine-independent default.
template <class... OpArgs, class TilingFn, class... ArgNames>
void def_tiling_hook(pybind11::module_& m, const char* name, TilingFn tiling, const ArgNames&... op_arg_names) {
  m.def(
      name,
      [tiling](OpArgs... args, int threads, int64_t l1, int64_t l2, int64_t l3, const std::string& isa) {
        return tiling_dict(tiling(args..., platform_from(threads, l1, l2, l3, isa)));
      },
      op_arg_names..., pybind11::arg("threads"), pybind11::arg("l1_bytes") = 32 << 10,
      pybind11::arg("l2_bytes") = 1 << 20, pybind11::arg("l3_bytes") = 32 << 20, pybind11::arg("isa") = "avx512");
}

}  // namespace tilegrad::py_support
