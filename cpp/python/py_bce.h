// What the BCE-with-logits bindings (forward and backward) read the same way: the operands they
// share, the reduction, and the tiling test hook's parameters.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "py_args.h"
#include "py_tensor.h"
#include "py_tiling.h"

namespace tilegrad::py_support {

struct BceOperands {
  TensorView input, target, weight, pos_weight;  // weight / pos_weight: TensorView{} for None
  Reduction reduction;
};

// Converted in argument order (the first bad one is reported); reduction: "none"/"mean"/"sum" or
// the aclnn codes 0/1/2.
inline BceOperands bce_operands_of(const char* op, const py::object& input, const py::object& target,
                                   const py::object& weight, const py::object& pos_weight,
                                   const py::object& reduction) {
  BceOperands a;
  a.input = view_of(input, "input");
  a.target = view_of(target, "target");
  a.weight = optional_view_of(weight, "weight");
  a.pos_weight = optional_view_of(pos_weight, "pos_weight");
  a.reduction = reduction_of(op, reduction, /*accept_codes=*/true);
  return a;
}

// _<name>(numel, bytes_per_elem, out_contiguous, reduction, threads, l1_bytes, l2_bytes, l3_bytes,
// isa): the tiling `tiling(...)` picks on a simulated machine, as a dict.
template <class TilingFn>
void def_bce_tiling(py::module_& m, const char* name, TilingFn tiling) {
  m.def(
      name,
      [tiling](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int64_t reduction, int threads, int64_t l1,
               int64_t l2, int64_t l3, const std::string& isa) {
        return tiling_dict(tiling(numel, bytes_per_elem, out_contiguous, reduction,
                                  platform_from(threads, l1, l2, l3, isa)));
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("reduction"),
      py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}

}  // namespace tilegrad::py_support
