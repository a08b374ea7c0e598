// Python binding of aclnnApplyAdamWV2: tilegrad._core.apply_adam_w(var, m, v, grad, step, ...), in place.
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "tilegrad/adamw.hpp"

void bind_apply_adam_w_v2(py::module_& m) {
  m.def(
      "apply_adam_w",
      [](const py::object& var, const py::object& m_, const py::object& v, const py::object& grad,
         const py::object& step, const py::object& max_v, double lr, double beta1, double beta2, double weight_decay,
         double eps, bool amsgrad, bool maximize) {
        const TensorView tv = py_support::view_of(var, "var", true), tm = py_support::view_of(m_, "m", true),
                         tvv = py_support::view_of(v, "v", true), tg = py_support::view_of(grad, "grad"),
                         ts = py_support::view_of(step, "step"),
                         tmx = max_v.is_none() ? TensorView{} : py_support::view_of(max_v, "max_v", true);
        // The C ABI passes float hyper-parameters: round them the same way here.
        const AdamWOptions o{static_cast<float>(lr), static_cast<float>(beta1), static_cast<float>(beta2),
                             static_cast<float>(weight_decay), static_cast<float>(eps), amsgrad, maximize};
        py::gil_scoped_release release;
        apply_adam_w_v2(tv, tm, tvv, tmx, tg, ts, o);
      },
      py::arg("var"), py::arg("m"), py::arg("v"), py::arg("grad"), py::arg("step"), py::arg("max_v"), py::arg("lr"),
      py::arg("beta1"), py::arg("beta2"), py::arg("weight_decay"), py::arg("eps"), py::arg("amsgrad"),
      py::arg("maximize"));
}
