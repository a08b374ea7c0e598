// Python binding of aclnnSwiGlu: tilegrad._core.swi_glu(x, dim, out=None).
#include <pybind11/pybind11.h>

#include "ops/swi_glu/swi_glu_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/swi_glu.hpp"

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
      "_swi_glu_tiling",
      [](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        return py_support::tiling_dict(ops::swi_glu_tiling(numel, bytes_per_elem, out_contiguous,
                                                           py_support::platform_from(threads, l1, l2, l3, isa)));
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("threads"),
      py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20, py::arg("l3_bytes") = 32 << 20,
      py::arg("isa") = "avx512");
}
