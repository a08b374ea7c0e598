// Python binding of aclnnFusedLinearCrossEntropyLossGrad.
#include <pybind11/pybind11.h>

#include "core/tensor.h"
#include "py_tensor.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

void bind_fused_linear_cross_entropy_loss_grad(py::module_& m) {
  m.def(
      "fused_linear_cross_entropy_loss_grad",
      [](const py::object& grad, const py::object& input, const py::object& weight, const py::object& target_mask,
         const py::object& masked_target, float label_smoothing, const py::object& logits_max,
         const py::object& sum_exp, const py::object& softmax) {
        const TensorView g = py_support::view_of(grad, "grad");
        const TensorView x = py_support::view_of(input, "input");
        const TensorView w = py_support::view_of(weight, "weight");
        const TensorView mask = py_support::view_of(target_mask, "target_mask");
        const TensorView mt = py_support::view_of(masked_target, "masked_target");
        const TensorView mx = py_support::optional_view_of(logits_max, "logits_max");
        const TensorView s = py_support::optional_view_of(sum_exp, "sum_exp_logits");
        const TensorView sm = py_support::optional_view_of(softmax, "softmax");
        const DType dt = core::is_float_dtype(x.dtype) ? x.dtype : DType::kFloat32;
        const int64_t bt = x.rank() >= 1 ? x.shape[0] : 0, h = x.rank() >= 2 ? x.shape[1] : 0;
        const int64_t v = w.rank() >= 1 ? w.shape[0] : 0;
        py::array gi = py_support::allocate({dt, {bt, h}});
        py::array gw = py_support::allocate({dt, {v, h}});
        const TensorView vgi = py_support::view_of(gi, "grad_input", true);
        const TensorView vgw = py_support::view_of(gw, "grad_weight", true);
        {
          py::gil_scoped_release release;
          fused_linear_cross_entropy_loss_grad(g, x, w, mask, mt, label_smoothing,
                                               logits_max.is_none() ? nullptr : &mx, sum_exp.is_none() ? nullptr : &s,
                                               softmax.is_none() ? nullptr : &sm, vgi, vgw);
        }
        return py::make_tuple(gi, gw);
      },
      py::arg("grad"), py::arg("input"), py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
      py::arg("label_smoothing") = 0.0f, py::arg("logits_max") = py::none(), py::arg("sum_exp_logits") = py::none(),
      py::arg("softmax") = py::none());
}
