// Python binding of aclnnGeGluV3Backward: tilegrad._core.ge_glu_backward(grad_output, x, gelu, dim,
// approximate, activate_left, out=None).
#include <pybind11/pybind11.h>

#include <string>

#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "tilegrad/ge_glu.hpp"

void bind_ge_glu_backward(py::module_& m) {
  m.def(
      "ge_glu_backward",
      [](const py::object& grad_output, const py::object& x_obj, const py::object& gelu_obj, int64_t dim,
         const std::string& approximate, bool activate_left, const py::object& out) {
        constexpr const char* kOp = "aclnnGeGluV3Backward";
        const TensorView dy = py_support::view_of(grad_output, "grad_output");
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView g = py_support::view_of(gelu_obj, "gelu");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        py::object result = py_support::given_or_allocated(
            out, [&] { return ge_glu_backward_output_spec(dy, x, g, dim); }, kOp, "out");
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          ge_glu_backward(dy, x, g, dim, form, activate_left, dx);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("x"), py::arg("gelu"), py::arg("dim"), py::arg("approximate"),
      py::arg("activate_left"), py::arg("out") = py::none());
}
