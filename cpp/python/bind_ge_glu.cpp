// Python bindings of aclnnGeGluV3: tilegrad._core.ge_glu(x, dim, approximate, activate_left, out=None,
// out_gelu=None) -> (out, out_gelu). Its tiling hook is _elementwise_op_tiling (module.cpp).
#include <pybind11/pybind11.h>

#include <string>

#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "tilegrad/ge_glu.hpp"

void bind_ge_glu(py::module_& m) {
  m.def(
      "ge_glu",
      [](const py::object& x_obj, int64_t dim, const std::string& approximate, bool activate_left,
         const py::object& out, const py::object& out_gelu) {
        constexpr const char* kOp = "aclnnGeGluV3";
        const TensorView x = py_support::view_of(x_obj, "x");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        const auto spec = [&] { return ge_glu_output_spec(x, dim); };
        py::object r_out = py_support::given_or_allocated(out, spec, kOp, "out");
        py::object r_gelu = py_support::given_or_allocated(out_gelu, spec, kOp, "out_gelu");
        const TensorView o = py_support::view_of(r_out, "out", true);
        const TensorView g = py_support::view_of(r_gelu, "out_gelu", true);
        {
          py::gil_scoped_release release;
          ge_glu(x, dim, form, activate_left, o, g);
        }
        return py::make_tuple(r_out, r_gelu);
      },
      py::arg("x"), py::arg("dim"), py::arg("approximate"), py::arg("activate_left"), py::arg("out") = py::none(),
      py::arg("out_gelu") = py::none());

}
