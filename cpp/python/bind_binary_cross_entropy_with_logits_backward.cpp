// Python binding of aclnnBinaryCrossEntropyWithLogitsBackward:
// tilegrad._core.binary_cross_entropy_with_logits_backward(grad_output, input, target, weight=None,
// pos_weight=None, reduction="mean", out=None); reduction is "none"/"mean"/"sum" or the aclnn codes 0/1/2.
#include <pybind11/pybind11.h>

#include "ops/loss/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_backward_tiling.h"
#include "py_bce.h"
#include "py_tensor.h"
#include "tilegrad/binary_cross_entropy_with_logits_backward.hpp"

namespace {
constexpr const char* kOp = "aclnnBinaryCrossEntropyWithLogitsBackward";
}

void bind_binary_cross_entropy_with_logits_backward(py::module_& m) {
  m.def(
      "binary_cross_entropy_with_logits_backward",
      [](const py::object& grad_output, const py::object& input, const py::object& target, const py::object& weight,
         const py::object& pos_weight, const py::object& reduction, const py::object& out) {
        const TensorView dy = py_support::view_of(grad_output, "grad_output");
        const auto a = py_support::bce_operands_of(kOp, input, target, weight, pos_weight, reduction);
        py::object result = py_support::given_or_allocated(
            out,
            [&] {
              return binary_cross_entropy_with_logits_backward_output_spec(dy, a.input, a.target, a.weight,
                                                                           a.pos_weight);
            },
            kOp, "out");
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          binary_cross_entropy_with_logits_backward(dy, a.input, a.target, a.weight, a.pos_weight, a.reduction, dx);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("pos_weight") = py::none(), py::arg("reduction") = "mean", py::arg("out") = py::none());

  py_support::def_bce_tiling(m, "_binary_cross_entropy_with_logits_backward_tiling", ops::bce_backward_tiling);
}
