// Python binding of aclnnSiluBackward: tilegrad._core.silu_backward(grad_output, input, out=None).
#include <pybind11/pybind11.h>

#include "ops/activation/silu/silu_backward_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/silu_backward.hpp"

constexpr const char* kOp = "aclnnSiluBackward";

void bind_silu_backward(py::module_& m) {
  m.def(
      "silu_backward",
      [](const py::object& grad_output, const py::object& input, const py::object& out) {
        const TensorView dy = py_support::view_of(grad_output, "grad_output");
        const TensorView x = py_support::view_of(input, "input");
        py::object result = out.is_none() ? py::object(py_support::allocate(silu_backward_output_spec(dy, x), kOp, "out")) : out;
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          silu_backward(dy, x, dx);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("input"), py::arg("out") = py::none());

  m.def(
      "_silu_backward_tiling",
      [](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        const auto t = ops::silu_backward_tiling(numel, bytes_per_elem, out_contiguous,
                                                 py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("threads"),
      py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20, py::arg("l3_bytes") = 32 << 20,
      py::arg("isa") = "avx512");
}
