// Python bindings of aclnnGeluV2: tilegrad._core.gelu(x, approximate, out=None) ("none" | "tanh"),
// and the tiling hook _gelu_tiling of GELU and GeGLU (core/elementwise_op_tiling.h: both families, forward
// and backward, share it).
#include <pybind11/pybind11.h>

#include <string>

#include "core/tensor.h"
#include "ops/activation/gelu/gelu_checks.h"
#include "core/elementwise_op_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
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

  m.def(
      "_gelu_tiling",
      [](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        return py_support::tiling_dict(core::elementwise_op_tiling(numel, bytes_per_elem, out_contiguous,
                                                        py_support::platform_from(threads, l1, l2, l3, isa)));
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("threads"),
      py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20, py::arg("l3_bytes") = 32 << 20,
      py::arg("isa") = "avx512");
}
