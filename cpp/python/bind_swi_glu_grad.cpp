// Python binding of aclnnSwiGluGrad: tilegrad._core.swi_glu_grad(y_grad, x, dim, out=None).
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/swi_glu.hpp"

void bind_swi_glu_grad(py::module_& m) {
  m.def(
      "swi_glu_grad",
      [](const py::object& dy_obj, const py::object& x_obj, int64_t dim, const py::object& out) {
        const TensorView dy = py_support::view_of(dy_obj, "y_grad");
        const TensorView x = py_support::view_of(x_obj, "x");
        py::object result = out.is_none() ? py::object(py_support::allocate(swi_glu_grad_output_spec(dy, x, dim),
                                                                            "aclnnSwiGluGrad", "out"))
                                          : out;
        const TensorView o = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          swi_glu_grad(dy, x, dim, o);
        }
        return result;
      },
      py::arg("y_grad"), py::arg("x"), py::arg("dim"), py::arg("out") = py::none());
}
