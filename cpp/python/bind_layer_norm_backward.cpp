// Python binding of aclnnLayerNormBackward: tilegrad._core.layer_norm_backward(dy, x, normalized_shape, mean,
// rstd, weight=None, bias=None, output_mask=(True, True, True), dx_out=None, dweight_out=None,
// dbias_out=None) -> (dx, dweight, dbias), None where the mask is False.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <vector>

#include "ops/norm/layer_norm/layer_norm_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/layer_norm.hpp"

namespace {
constexpr const char* kOp = "aclnnLayerNormBackward";

// The output the mask asks for: the caller's, or a new one of `spec`; None when not asked for.
py::object masked_output(bool wanted, const py::object& given, const OutputSpec& spec, const char* arg) {
  if (!wanted) return py::none();
  return given.is_none() ? py::object(py_support::allocate(spec, kOp, arg)) : given;
}

TensorView output_view(const py::object& obj, const char* arg) {
  return obj.is_none() ? TensorView{} : py_support::view_of(obj, arg, true);
}
}  // namespace

void bind_layer_norm_backward(py::module_& m) {
  m.def(
      "layer_norm_backward",
      [](const py::object& dy_obj, const py::object& x_obj, const std::vector<int64_t>& normalized_shape,
         const py::object& mean_obj, const py::object& rstd_obj, const py::object& weight, const py::object& bias,
         const std::array<bool, 3>& output_mask, const py::object& dx_out, const py::object& dweight_out,
         const py::object& dbias_out) {
        const TensorView dy = py_support::view_of(dy_obj, "dy");
        const TensorView x = py_support::view_of(x_obj, "x");
        const TensorView mean = py_support::view_of(mean_obj, "mean");
        const TensorView rstd = py_support::view_of(rstd_obj, "rstd");
        const TensorView w = py_support::optional_view_of(weight, "weight");
        const TensorView b = py_support::optional_view_of(bias, "bias");
        const LayerNormBackwardOutputSpecs specs = layer_norm_backward_output_specs(x, normalized_shape);
        py::object dx = masked_output(output_mask[0], dx_out, specs.dx, "dx_out");
        py::object dw = masked_output(output_mask[1], dweight_out, specs.dweight, "dweight_out");
        py::object db = masked_output(output_mask[2], dbias_out, specs.dbias, "dbias_out");
        const TensorView dxv = output_view(dx, "dx_out"), dwv = output_view(dw, "dweight_out"),
                         dbv = output_view(db, "dbias_out");
        {
          py::gil_scoped_release release;
          layer_norm_backward(dy, x, normalized_shape, mean, rstd, w, b, dxv, dwv, dbv);
        }
        return py::make_tuple(dx, dw, db);
      },
      py::arg("dy"), py::arg("x"), py::arg("normalized_shape"), py::arg("mean"), py::arg("rstd"),
      py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("output_mask") = std::array<bool, 3>{true, true, true}, py::arg("dx_out") = py::none(),
      py::arg("dweight_out") = py::none(), py::arg("dbias_out") = py::none());

  py_support::def_tiling_hook<int64_t, int64_t, int64_t, bool, bool>(
      m, "_layer_norm_backward_tiling", ops::layer_norm_backward_tiling, py::arg("rows"), py::arg("cols"),
      py::arg("elem_bytes"), py::arg("pack_rows"), py::arg("dx_dense"));
}
