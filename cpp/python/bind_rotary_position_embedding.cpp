// Python binding of aclnnRotaryPositionEmbedding: tilegrad._core.rotary_position_embedding(x, cos, sin, mode, out=None).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>

#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/rotary_position_embedding.hpp"

constexpr const char* kOp = "aclnnRotaryPositionEmbedding";

namespace tilegrad::py_support {

// A RopeShape from the tiling hooks' arguments (no validation: tests pass consistent shapes).
ops::RopeShape rope_shape_from(const std::array<int64_t, 3>& dims, const std::array<int64_t, 3>& cos_dims,
                               int64_t d, int mode) {
  ops::RopeShape s;
  for (int k = 0; k < 3; ++k) {
    s.dims[k] = dims[k];
    s.cos_dims[k] = cos_dims[k];
  }
  s.d = d;
  s.mode = static_cast<ops::RopeMode>(mode);
  return s;
}

}  // namespace tilegrad::py_support

void bind_rotary_position_embedding(py::module_& m) {
  m.def(
      "rotary_position_embedding",
      [](const py::object& x, const py::object& cos, const py::object& sin, int64_t mode, const py::object& out) {
        const TensorView xv = py_support::view_of(x, "x");
        const TensorView cv = py_support::view_of(cos, "cos");
        const TensorView sv = py_support::view_of(sin, "sin");
        py::object result =
            out.is_none() ? py::object(py_support::allocate(rotary_position_embedding_output_spec(xv, cv, sv, mode), kOp, "out"))
                          : out;
        const TensorView ov = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          rotary_position_embedding(xv, cv, sv, mode, ov);
        }
        return result;
      },
      py::arg("x"), py::arg("cos"), py::arg("sin"), py::arg("mode") = 0, py::arg("out") = py::none());

  m.def(
      "_rotary_position_embedding_tiling",
      [](const std::array<int64_t, 3>& dims, const std::array<int64_t, 3>& cos_dims, int64_t d, int mode,
         int64_t elem_bytes, bool out_rows_aligned, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        const auto t = ops::rotary_position_embedding_tiling(py_support::rope_shape_from(dims, cos_dims, d, mode),
                                                             elem_bytes, out_rows_aligned,
                                                             py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("dims"), py::arg("cos_dims"), py::arg("d"), py::arg("mode"), py::arg("elem_bytes"),
      py::arg("out_rows_aligned"), py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}
