// Python binding of aclnnRmsNormGrad: tilegrad._core.rms_norm_grad(dy, x, rstd, gamma, out=None, dgamma_out=None,
// weight_offset=0.0).
#include <pybind11/pybind11.h>

#include "ops/norm/rms_norm/rms_norm_grad_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/rms_norm.hpp"

namespace {
constexpr const char* kOp = "aclnnRmsNormGrad";
}

void bind_rms_norm_grad(py::module_& m) {
  m.def(
      "rms_norm_grad",
      [](const py::object& dy_obj, const py::object& x_obj, const py::object& rstd_obj, const py::object& gamma_obj,
         const py::object& out, const py::object& dgamma_out, double weight_offset) {
        const TensorView dy = py_support::view_of(dy_obj, "dy");
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView rstd = py_support::view_of(rstd_obj, "rstd");
        const TensorView gamma = py_support::view_of(gamma_obj, "gamma");
        RmsNormGradOutputSpecs specs;
        if (out.is_none() || dgamma_out.is_none()) specs = rms_norm_grad_output_specs(dy, x, rstd, gamma);
        py::object dx = out.is_none() ? py::object(py_support::allocate(specs.dx, kOp, "out")) : out;
        py::object dg = dgamma_out.is_none() ? py::object(py_support::allocate(specs.dgamma, kOp, "dgamma_out"))
                                             : dgamma_out;
        const TensorView dxv = py_support::view_of(dx, "out", true);
        const TensorView dgv = py_support::view_of(dg, "dgamma_out", true);
        {
          py::gil_scoped_release release;
          rms_norm_grad(dy, x, rstd, gamma, dxv, dgv, weight_offset);
        }
        return py::make_tuple(dx, dg);
      },
      py::arg("dy"), py::arg("x"), py::arg("rstd"), py::arg("gamma"), py::arg("out") = py::none(),
      py::arg("dgamma_out") = py::none(), py::arg("weight_offset") = 0.0);

  py_support::def_tiling_hook<int64_t, int64_t, int64_t, bool, bool>(
      m, "_rms_norm_grad_tiling", ops::rms_norm_grad_tiling, py::arg("rows"), py::arg("cols"), py::arg("elem_bytes"),
      py::arg("pack_rows"), py::arg("dx_dense"));
}
