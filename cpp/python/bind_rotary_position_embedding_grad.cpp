// Python binding of aclnnRotaryPositionEmbeddingGrad:
// tilegrad._core.rotary_position_embedding_grad(dy, cos, sin, x=None, mode=0, dx=None, dcos=None, dsin=None)
// -> (dx, dcos, dsin); dcos and dsin are computed (allocated when not given) only when x is given.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>

#include "core/tensor.h"
#include "ops/posembedding/rotary_position_embedding/rotary_position_embedding_grad_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/rotary_position_embedding.hpp"

constexpr const char* kOp = "aclnnRotaryPositionEmbeddingGrad";

namespace tilegrad::py_support {
// bind_rotary_position_embedding.cpp
ops::RopeShape rope_shape_from(const std::array<int64_t, 3>& dims, const std::array<int64_t, 3>& cos_dims,
                               int64_t d, int mode);
}  // namespace tilegrad::py_support

void bind_rotary_position_embedding_grad(py::module_& m) {
  m.def(
      "rotary_position_embedding_grad",
      [](const py::object& dy, const py::object& cos, const py::object& sin, const py::object& x, int64_t mode,
         const py::object& dx, const py::object& dcos, const py::object& dsin) {
        const TensorView dyv = py_support::view_of(dy, "dy");
        const TensorView cv = py_support::view_of(cos, "cos");
        const TensorView sv = py_support::view_of(sin, "sin");
        const TensorView xv = py_support::optional_view_of(x, "x");
        const bool with_x = !x.is_none();
        // Outputs allocated like their references (dy's and cos's dtype and shape); for a reference of a
        // dtype no operator takes, a float32 placeholder, so that the call reports that dtype rather than
        // a missing output. A bad shape of the inputs is reported by the call itself.
        const auto make = [](const py::object& given, const TensorView& like, const char* arg) {
          if (!given.is_none()) return given;
          const DType dtype = core::is_float_dtype(like.dtype) ? like.dtype : DType::kFloat32;
          return py::object(py_support::allocate(OutputSpec{dtype, like.shape}, kOp, arg));
        };
        py::object rdx = make(dx, dyv, "dx");
        py::object rdcos = with_x ? make(dcos, cv, "dcos") : dcos;
        py::object rdsin = with_x ? make(dsin, cv, "dsin") : dsin;
        const TensorView dxv = rdx.is_none() ? TensorView{} : py_support::view_of(rdx, "dx", true);
        const TensorView dcv = rdcos.is_none() ? TensorView{} : py_support::view_of(rdcos, "dcos", true);
        const TensorView dsv = rdsin.is_none() ? TensorView{} : py_support::view_of(rdsin, "dsin", true);
        {
          py::gil_scoped_release release;
          rotary_position_embedding_grad(dyv, cv, sv, xv, mode, dxv, dcv, dsv);
        }
        return py::make_tuple(rdx, rdcos, rdsin);
      },
      py::arg("dy"), py::arg("cos"), py::arg("sin"), py::arg("x") = py::none(), py::arg("mode") = 0,
      py::arg("dx") = py::none(), py::arg("dcos") = py::none(), py::arg("dsin") = py::none());

  m.def(
      "_rotary_position_embedding_grad_tiling",
      [](const std::array<int64_t, 3>& dims, const std::array<int64_t, 3>& cos_dims, int64_t d, int mode,
         int64_t elem_bytes, bool with_x, bool dx_rows_aligned, int threads, int64_t l1, int64_t l2, int64_t l3,
         const std::string& isa) {
        const auto t = ops::rotary_position_embedding_grad_tiling(
            py_support::rope_shape_from(dims, cos_dims, d, mode), elem_bytes, with_x, dx_rows_aligned,
            py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("dims"), py::arg("cos_dims"), py::arg("d"), py::arg("mode"), py::arg("elem_bytes"), py::arg("with_x"),
      py::arg("dx_rows_aligned"), py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}
