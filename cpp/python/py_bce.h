// What the BCE-with-logits bindings (forward and backward) read the same way: the operands they
// share, the reduction, and the tiling test hook's parameters.
#pragma once

#include <pybind11/pybind11.h>

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

// The tiling test hook _<name>(numel, bytes_per_elem, out_contiguous, reduction, machine...).
template <class TilingFn>
void def_bce_tiling(py::module_& m, const char* name, TilingFn tiling) {
  def_tiling_hook<int64_t, int64_t, bool, int64_t>(m, name, tiling, py::arg("numel"), py::arg("bytes_per_elem"),
                                                   py::arg("out_contiguous"), py::arg("reduction"));
}

}  // namespace tilegrad::py_support
