// Python binding of aclnnGeluBackwardV2: tilegrad._core.gelu_backward(grad_output, input, approximate,
// out=None) ("none" | "tanh").
#include <pybind11/pybind11.h>

#include <string>

#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "tilegrad/gelu.hpp"

void bind_gelu_backward(py::module_& m) {
  m.def(
      "gelu_backward",
      [](const py::object& grad_output, const py::object& input, const std::string& approximate,
         const py::object& out) {
        constexpr const char* kOp = "aclnnGeluBackwardV2";
        const TensorView dy = py_support::view_of(grad_output, "grad_output");
        const TensorView x = py_support::view_of(input, "input");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        py::object result =
            py_support::given_or_allocated(out, [&] { return gelu_backward_output_spec(dy, x); }, kOp, "out");
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          gelu_backward(dy, x, form, dx);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("input"), py::arg("approximate"), py::arg("out") = py::none());
}
