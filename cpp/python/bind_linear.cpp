// Python binding of linear: tilegrad._core.linear(x, weight, bias=None, out=None).
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/linear.hpp"

void bind_linear(py::module_& m) {
  m.def(
      "linear",
      [](const py::object& x_obj, const py::object& w_obj, const py::object& b_obj, const py::object& out) {
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView w = py_support::view_of(w_obj, "weight");
        const TensorView b = py_support::optional_view_of(b_obj, "bias");
        py::object result =
            py_support::given_or_allocated(out, [&] { return linear_output_spec(x, w, b); }, "tilegrad.linear", "out");
        const TensorView o = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          linear(x, w, b, o);
        }
        return result;
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("out") = py::none());
}
