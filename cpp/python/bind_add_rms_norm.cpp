// Python bindings of aclnnAddRmsNorm and tilegrad's fused backward:
//   tilegrad._core.add_rms_norm(x1, x2, gamma, epsilon, out=None, rstd_out=None, x_out=None)
//   tilegrad._core.add_rms_norm_backward(dy, x_out, rstd, gamma, dresidual=None, out=None, dgamma_out=None)
#include <pybind11/pybind11.h>

#include "ops/norm/add_rms_norm/add_rms_norm_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/add_rms_norm.hpp"

namespace {

constexpr const char* kOp = "aclnnAddRmsNorm";
constexpr const char* kBackwardOp = "add_rms_norm_backward";

// `given`, or a new array of `spec` for the output argument `arg`.
py::object output_or_new(const py::object& given, const OutputSpec& spec, const char* op, const char* arg) {
  return given.is_none() ? py::object(py_support::allocate(spec, op, arg)) : given;
}

}  // namespace

void bind_add_rms_norm(py::module_& m) {
  m.def(
      "add_rms_norm",
      [](const py::object& x1_obj, const py::object& x2_obj, const py::object& gamma_obj, double epsilon,
         const py::object& out, const py::object& rstd_out, const py::object& x_out) {
        const TensorView x1 = py_support::view_of(x1_obj, "x1");
        const TensorView x2 = py_support::view_of(x2_obj, "x2");
        const TensorView gamma = py_support::view_of(gamma_obj, "gamma");
        AddRmsNormOutputSpecs specs;
        if (out.is_none() || rstd_out.is_none() || x_out.is_none()) specs = add_rms_norm_output_specs(x1, x2, gamma);
        py::object y = output_or_new(out, specs.y, kOp, "out");
        py::object rstd = output_or_new(rstd_out, specs.rstd, kOp, "rstd_out");
        py::object xo = output_or_new(x_out, specs.x_out, kOp, "x_out");
        const TensorView yv = py_support::view_of(y, "out", true);
        const TensorView rv = py_support::view_of(rstd, "rstd_out", true);
        const TensorView xv = py_support::view_of(xo, "x_out", true);
        {
          py::gil_scoped_release release;
          add_rms_norm(x1, x2, gamma, epsilon, yv, rv, xv);
        }
        return py::make_tuple(y, rstd, xo);
      },
      py::arg("x1"), py::arg("x2"), py::arg("gamma"), py::arg("epsilon"), py::arg("out") = py::none(),
      py::arg("rstd_out") = py::none(), py::arg("x_out") = py::none());

  m.def(
      "add_rms_norm_backward",
      [](const py::object& dy_obj, const py::object& x_obj, const py::object& rstd_obj, const py::object& gamma_obj,
         const py::object& dres_obj, const py::object& out, const py::object& dgamma_out) {
        const TensorView dy = py_support::view_of(dy_obj, "dy");
        const TensorView x = py_support::view_of(x_obj, "x_out");
        const TensorView rstd = py_support::view_of(rstd_obj, "rstd");
        const TensorView gamma = py_support::view_of(gamma_obj, "gamma");
        TensorView dres;
        if (!dres_obj.is_none()) dres = py_support::view_of(dres_obj, "dresidual");
        AddRmsNormBackwardOutputSpecs specs;
        if (out.is_none() || dgamma_out.is_none()) specs = add_rms_norm_backward_output_specs(dy, x, rstd, gamma);
        py::object dx = output_or_new(out, specs.dx, kBackwardOp, "out");
        py::object dg = output_or_new(dgamma_out, specs.dgamma, kBackwardOp, "dgamma_out");
        const TensorView dxv = py_support::view_of(dx, "out", true);
        const TensorView dgv = py_support::view_of(dg, "dgamma_out", true);
        {
          py::gil_scoped_release release;
          add_rms_norm_backward(dy, x, rstd, gamma, dres_obj.is_none() ? nullptr : &dres, dxv, dgv);
        }
        return py::make_tuple(dx, dg);
      },
      py::arg("dy"), py::arg("x_out"), py::arg("rstd"), py::arg("gamma"), py::arg("dresidual") = py::none(),
      py::arg("out") = py::none(), py::arg("dgamma_out") = py::none());

  py_support::def_tiling_hook<int64_t, int64_t, int64_t, bool, bool>(
      m, "_add_rms_norm_tiling", ops::add_rms_norm_tiling, py::arg("rows"), py::arg("cols"), py::arg("elem_bytes"),
      py::arg("pack_rows"), py::arg("y_dense"));
}
