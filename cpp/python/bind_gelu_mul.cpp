// Python bindings of the GeGLU family's two-tensor form: tilegrad._core.gelu_mul(gate, up, approximate,
// out=None) and gelu_mul_backward(grad_output, gate, up, approximate, grad_gate=None, grad_up=None)
// ("none" | "tanh").
#include <pybind11/pybind11.h>

#include <string>

#include "core/tensor.h"
#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "tilegrad/ge_glu.hpp"

namespace {

// The output `given`, or a new array of gate's dtype and shape: None for a gate of no float dtype,
// so that the operator reports gate's dtype rather than an allocation failing.
TensorView output_view(py::object& given, const TensorView& gate, const char* op, const char* arg) {
  if (given.is_none() && core::is_float_dtype(gate.dtype))
    given = py_support::allocate(OutputSpec{gate.dtype, gate.shape}, op, arg);
  return given.is_none() ? TensorView{} : py_support::view_of(given, arg, true);
}

}  // namespace

void bind_gelu_mul(py::module_& m) {
  m.def(
      "gelu_mul",
      [](const py::object& gate_obj, const py::object& up_obj, const std::string& approximate, py::object out) {
        constexpr const char* kOp = "gelu_mul";
        const TensorView gate = py_support::view_of(gate_obj, "gate");
        const TensorView up = py_support::view_of(up_obj, "up");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        const TensorView o = output_view(out, gate, kOp, "out");
        {
          py::gil_scoped_release release;
          gelu_mul(gate, up, form, o);
        }
        return out;
      },
      py::arg("gate"), py::arg("up"), py::arg("approximate"), py::arg("out") = py::none());

  m.def(
      "gelu_mul_backward",
      [](const py::object& dy_obj, const py::object& gate_obj, const py::object& up_obj, const std::string& approximate,
         py::object grad_gate, py::object grad_up) {
        constexpr const char* kOp = "gelu_mul_backward";
        const TensorView dy = py_support::view_of(dy_obj, "grad_output");
        const TensorView gate = py_support::view_of(gate_obj, "gate");
        const TensorView up = py_support::view_of(up_obj, "up");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        const TensorView g = output_view(grad_gate, gate, kOp, "grad_gate");
        const TensorView u = output_view(grad_up, gate, kOp, "grad_up");
        {
          py::gil_scoped_release release;
          gelu_mul_backward(dy, gate, up, form, g, u);
        }
        return py::make_tuple(grad_gate, grad_up);
      },
      py::arg("grad_output"), py::arg("gate"), py::arg("up"), py::arg("approximate"), py::arg("grad_gate") = py::none(),
      py::arg("grad_up") = py::none());
}
