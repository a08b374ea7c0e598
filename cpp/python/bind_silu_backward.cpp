// Python binding of aclnnSiluBackward: tilegrad._core.silu_backward(grad_output, input, out=None).
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/silu_backward.hpp"

constexpr const char* kOp = "aclnnSiluBackward";

void bind_silu_backward(py::module_& m) {
  m.def(
      "silu_backward",
      [](const py::object& grad_output, const py::object& input, const py::object& out) {
        const TensorView dy = py_support::view_of(grad_output, "grad_output");
        const TensorView x = py_support::view_of(input, "input");
        py::object result = out.is_none() ? py::object(py_support::allocate(silu_backward_output_spec(dy, x), kOp, "out")) : out;
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          silu_backward(dy, x, dx);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("input"), py::arg("out") = py::none());
}
