// Python binding of aclnnFusedCrossEntropyLossWithMaxSum.
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

void bind_fused_cross_entropy_loss_with_max_sum(py::module_& m) {
  m.def(
      "fused_cross_entropy_loss_with_max_sum",
      [](const py::object& logits_max, const py::object& sum_exp, const py::object& predicted, float label_smoothing,
         const py::object& logits) {
        const TensorView mx = py_support::view_of(logits_max, "logits_max");
        const TensorView s = py_support::view_of(sum_exp, "sum_exp_logits");
        const TensorView p = py_support::view_of(predicted, "predicted_logits");
        const TensorView lg = py_support::optional_view_of(logits, "logits");
        std::vector<int64_t> loss_shape = mx.shape;
        py::array loss = py_support::allocate({DType::kFloat32, loss_shape});
        py::object softmax = py::none();
        if (!logits.is_none()) softmax = py_support::allocate({DType::kFloat32, lg.shape});
        const TensorView vloss = py_support::view_of(loss, "loss", true);
        const TensorView vsm = py_support::optional_view_of(softmax, "softmax");
        {
          py::gil_scoped_release release;
          fused_cross_entropy_loss_with_max_sum(mx, s, p, label_smoothing, vloss, logits.is_none() ? nullptr : &lg,
                                                logits.is_none() ? nullptr : &vsm);
        }
        return py::make_tuple(loss, softmax);
      },
      py::arg("logits_max"), py::arg("sum_exp_logits"), py::arg("predicted_logits"), py::arg("label_smoothing") = 0.0f,
      py::arg("logits") = py::none());
}
