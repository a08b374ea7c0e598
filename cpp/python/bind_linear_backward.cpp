// Python binding of linear_backward: tilegrad._core.linear_backward(grad_output, x, weight,
// grad_input, grad_weight, grad_bias): the gradients to compute are the arrays given (None: skipped);
// the Python wrapper allocates them.
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/linear.hpp"

void bind_linear_backward(py::module_& m) {
  m.def(
      "linear_backward",
      [](const py::object& dy_obj, const py::object& x_obj, const py::object& w_obj, const py::object& dx,
         const py::object& dw, const py::object& db) {
        const TensorView dy = py_support::view_of(dy_obj, "grad_output");
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView w = py_support::view_of(w_obj, "weight");
        const auto output = [](const py::object& o, const char* arg) {
          return o.is_none() ? TensorView{} : py_support::view_of(o, arg, true);
        };
        const LinearGrads grads{output(dx, "grad_input"), output(dw, "grad_weight"), output(db, "grad_bias")};
        {
          py::gil_scoped_release release;
          linear_backward(dy, x, w, grads);
        }
      },
      py::arg("grad_output"), py::arg("x"), py::arg("weight"), py::arg("grad_input") = py::none(),
      py::arg("grad_weight") = py::none(), py::arg("grad_bias") = py::none());
}
