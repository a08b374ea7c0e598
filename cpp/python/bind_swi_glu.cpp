// Python bindings of aclnnSwiGlu, tilegrad._core.swi_glu(x, dim, out=None), and of the family's
// two-tensor form: silu_mul(gate, up, out=None), silu_mul_grad(dy, gate, up, d_gate=None, d_up=None).
#include <pybind11/pybind11.h>

#include "py_tensor.h"
#include "core/tensor.h"
#include "tilegrad/swi_glu.hpp"

namespace {

// `given`, or a new array of `like`'s dtype and shape (a float dtype: else the operator reports it).
py::object like_or_new(const py::object& given, const TensorView& like, const char* op, const char* arg) {
  if (!given.is_none() || !core::is_float_dtype(like.dtype)) return given;
  return py::object(py_support::allocate(OutputSpec{like.dtype, like.shape}, op, arg));
}

}  // namespace

void bind_swi_glu(py::module_& m) {
  m.def(
      "swi_glu",
      [](const py::object& x_obj, int64_t dim, const py::object& out) {
        const TensorView x = py_support::view_of(x_obj, "x");
        py::object result =
            out.is_none() ? py::object(py_support::allocate(swi_glu_output_spec(x, dim), "aclnnSwiGlu", "out")) : out;
        const TensorView o = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          swi_glu(x, dim, o);
        }
        return result;
      },
      py::arg("x"), py::arg("dim"), py::arg("out") = py::none());

  m.def(
      "silu_mul",
      [](const py::object& gate_obj, const py::object& up_obj, const py::object& out) {
        const TensorView gate = py_support::view_of(gate_obj, "gate");
        const TensorView up = py_support::view_of(up_obj, "up");
        py::object result = like_or_new(out, gate, "silu_mul", "out");
        const TensorView o = result.is_none() ? TensorView{} : py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          silu_mul(gate, up, o);
        }
        return result;
      },
      py::arg("gate"), py::arg("up"), py::arg("out") = py::none());

  m.def(
      "silu_mul_grad",
      [](const py::object& dy_obj, const py::object& gate_obj, const py::object& up_obj, const py::object& d_gate,
         const py::object& d_up) {
        const TensorView dy = py_support::view_of(dy_obj, "dy");
        const TensorView gate = py_support::view_of(gate_obj, "gate");
        const TensorView up = py_support::view_of(up_obj, "up");
        py::object rg = like_or_new(d_gate, gate, "silu_mul_grad", "d_gate");
        py::object ru = like_or_new(d_up, gate, "silu_mul_grad", "d_up");
        const TensorView g = rg.is_none() ? TensorView{} : py_support::view_of(rg, "d_gate", true);
        const TensorView u = ru.is_none() ? TensorView{} : py_support::view_of(ru, "d_up", true);
        {
          py::gil_scoped_release release;
          silu_mul_grad(dy, gate, up, g, u);
        }
        return py::make_tuple(rg, ru);
      },
      py::arg("dy"), py::arg("gate"), py::arg("up"), py::arg("d_gate") = py::none(), py::arg("d_up") = py::none());
}
