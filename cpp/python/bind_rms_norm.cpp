// Python binding of aclnnRmsNorm: tilegrad._core.rms_norm(x, gamma, epsilon, out=None, rstd_out=None,
// weight_offset=0.0) (1.0: aclnnGemmaRmsNorm).
#include <pybind11/pybind11.h>

#include "ops/norm/rms_norm/rms_norm_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/rms_norm.hpp"

namespace {
constexpr const char* kOp = "aclnnRmsNorm";
}

void bind_rms_norm(py::module_& m) {
  m.def(
      "rms_norm",
      [](const py::object& x_obj, const py::object& gamma_obj, double epsilon, const py::object& out,
         const py::object& rstd_out, double weight_offset) {
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView gamma = py_support::view_of(gamma_obj, "gamma");
        RmsNormOutputSpecs specs;
        if (out.is_none() || rstd_out.is_none()) specs = rms_norm_output_specs(x, gamma);
        py::object y = out.is_none() ? py::object(py_support::allocate(specs.y, kOp, "out")) : out;
        py::object rstd = rstd_out.is_none() ? py::object(py_support::allocate(specs.rstd, kOp, "rstd_out")) : rstd_out;
        const TensorView yv = py_support::view_of(y, "out", true);
        const TensorView rv = py_support::view_of(rstd, "rstd_out", true);
        {
          py::gil_scoped_release release;
          rms_norm(x, gamma, epsilon, yv, rv, weight_offset);
        }
        return py::make_tuple(y, rstd);
      },
      py::arg("x"), py::arg("gamma"), py::arg("epsilon"), py::arg("out") = py::none(),
      py::arg("rstd_out") = py::none(), py::arg("weight_offset") = 0.0);

  py_support::def_tiling_hook<int64_t, int64_t, int64_t, bool, bool>(
      m, "_rms_norm_tiling", ops::rms_norm_tiling, py::arg("rows"), py::arg("cols"), py::arg("elem_bytes"),
      py::arg("pack_rows"), py::arg("y_dense"));
}
