// Python binding of aclnnGeluV2: tilegrad._core.gelu(x, approximate, out=None) ("none" | "tanh"). Its
// tiling hook is the elementwise operators' _elementwise_op_tiling (module.cpp).
#include <pybind11/pybind11.h>

#include <string>

#include "core/tensor.h"
#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "tilegrad/gelu.hpp"

void bind_gelu(py::module_& m) {
  m.def(
      "gelu",
      [](const py::object& x_obj, const std::string& approximate, const py::object& out) {
        constexpr const char* kOp = "aclnnGeluV2";
        const TensorView x = py_support::view_of(x_obj, "x");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        // A new out like x; for a non-float x none, so that the operator reports x's dtype.
        py::object result = out.is_none() && core::is_float_dtype(x.dtype)
                                ? py::object(py_support::allocate(OutputSpec{x.dtype, x.shape}, kOp, "out"))
                                : out;
        const TensorView o = result.is_none() ? x : py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          gelu(x, form, o);
        }
        return result;
      },
      py::arg("x"), py::arg("approximate"), py::arg("out") = py::none());
}
