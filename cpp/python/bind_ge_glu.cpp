// Python bindings of aclnnGeGluV3: tilegrad._core.ge_glu(x, dim, approximate, activate_left, out=None,
// out_gelu=None) -> (out, out_gelu), and the GeGLU tiling hook _ge_glu_tiling (the backward shares it).
#include <pybind11/pybind11.h>

#include <string>

#include "core/elementwise_op_tiling.h"
#include "ops/activation/gelu/gelu_checks.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/ge_glu.hpp"

void bind_ge_glu(py::module_& m) {
  m.def(
      "ge_glu",
      [](const py::object& x_obj, int64_t dim, const std::string& approximate, bool activate_left,
         const py::object& out, const py::object& out_gelu) {
        constexpr const char* kOp = "aclnnGeGluV3";
        const TensorView x = py_support::view_of(x_obj, "x");
        const GeluApproximate form = ops::gelu_checks::approximate_from_name(kOp, approximate.c_str());
        const auto spec = [&] { return ge_glu_output_spec(x, dim); };
        py::object r_out = py_support::given_or_allocated(out, spec, kOp, "out");
        py::object r_gelu = py_support::given_or_allocated(out_gelu, spec, kOp, "out_gelu");
        const TensorView o = py_support::view_of(r_out, "out", true);
        const TensorView g = py_support::view_of(r_gelu, "out_gelu", true);
        {
          py::gil_scoped_release release;
          ge_glu(x, dim, form, activate_left, o, g);
        }
        return py::make_tuple(r_out, r_gelu);
      },
      py::arg("x"), py::arg("dim"), py::arg("approximate"), py::arg("activate_left"), py::arg("out") = py::none(),
      py::arg("out_gelu") = py::none());

  m.def(
      "_ge_glu_tiling",
      [](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        return py_support::tiling_dict(core::elementwise_op_tiling(numel, bytes_per_elem, out_contiguous,
                                                          py_support::platform_from(threads, l1, l2, l3, isa)));
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("threads"),
      py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20, py::arg("l3_bytes") = 32 << 20,
      py::arg("isa") = "avx512");
}
