// Python binding of aclnnLayerNorm: tilegrad._core.layer_norm(x, normalized_shape, weight=None, bias=None,
// eps=1e-5, out=None, mean_out=None, rstd_out=None) -> (out, mean, rstd).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "ops/norm/layer_norm/layer_norm_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/layer_norm.hpp"

namespace {
constexpr const char* kOp = "aclnnLayerNorm";
}

void bind_layer_norm(py::module_& m) {
  m.def(
      "layer_norm",
      [](const py::object& x_obj, const std::vector<int64_t>& normalized_shape, const py::object& weight,
         const py::object& bias, double eps, const py::object& out, const py::object& mean_out,
         const py::object& rstd_out) {
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView w = py_support::optional_view_of(weight, "weight");
        const TensorView b = py_support::optional_view_of(bias, "bias");
        LayerNormOutputSpecs specs;
        if (out.is_none() || mean_out.is_none() || rstd_out.is_none())
          specs = layer_norm_output_specs(x, normalized_shape);
        py::object y = out.is_none() ? py::object(py_support::allocate(specs.out, kOp, "out")) : out;
        py::object mean = mean_out.is_none() ? py::object(py_support::allocate(specs.mean, kOp, "mean_out")) : mean_out;
        py::object rstd = rstd_out.is_none() ? py::object(py_support::allocate(specs.rstd, kOp, "rstd_out")) : rstd_out;
        const TensorView yv = py_support::view_of(y, "out", true);
        const TensorView mv = py_support::view_of(mean, "mean_out", true);
        const TensorView rv = py_support::view_of(rstd, "rstd_out", true);
        {
          py::gil_scoped_release release;
          layer_norm(x, normalized_shape, w, b, eps, yv, mv, rv);
        }
        return py::make_tuple(y, mean, rstd);
      },
      py::arg("x"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5, py::arg("out") = py::none(), py::arg("mean_out") = py::none(),
      py::arg("rstd_out") = py::none());

  py_support::def_tiling_hook<int64_t, int64_t, int64_t, bool, bool>(
      m, "_layer_norm_tiling", ops::layer_norm_tiling, py::arg("rows"), py::arg("cols"), py::arg("elem_bytes"),
      py::arg("pack_rows"), py::arg("out_dense"));
}
