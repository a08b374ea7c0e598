// Python binding of aclnnEmbeddingDenseBackward:
// tilegrad._core.embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, out=None).
#include <pybind11/pybind11.h>

#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/embedding_dense_backward.hpp"

constexpr const char* kOp = "aclnnEmbeddingDenseBackward";

namespace {

// The C ABI takes float indices and truncates them (the vendor's contract, spec section 4), but from
// Python that turns a bug (0.7 for row 0) into a silent wrong gradient: torch refuses float indices,
// and so do tilegrad's NumPy entry and torch.ops.tilegrad.embedding_dense_backward.
void require_integer_indices(const TensorView& idx) {
  const DType d = idx.dtype;
  if (d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kFloat64 || d == DType::kBFloat16) {
    throw py::type_error(std::string(kOp) + ": indices must be an integer or bool array (int64, int32, int16, "
                         "int8, uint8, bool), got " + dtype_name(d) +
                         "; like torch (\"Expected tensor for argument 'indices' to have one of the following "
                         "scalar types: Long, Int\"), float indices are refused instead of truncated");
  }
}

}  // namespace

void bind_embedding_dense_backward(py::module_& m) {
  m.def(
      "embedding_dense_backward",
      [](const py::object& grad, const py::object& indices, int64_t num_weights, int64_t padding_idx,
         bool scale_grad_by_freq, const py::object& out) {
        const TensorView g = py_support::view_of(grad, "grad_output");
        const TensorView idx = py_support::view_of(indices, "indices");
        require_integer_indices(idx);
        py::object result =
            out.is_none() ? py::object(py_support::allocate(embedding_dense_backward_output_spec(g, idx, num_weights), kOp, "out"))
                          : out;
        const TensorView o = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          embedding_dense_backward(g, idx, num_weights, padding_idx, scale_grad_by_freq, o);
        }
        return result;
      },
      py::arg("grad_output"), py::arg("indices"), py::arg("num_weights"), py::arg("padding_idx") = -1,
      py::arg("scale_grad_by_freq") = false, py::arg("out") = py::none());

  m.def(
      "_embedding_dense_backward_tiling",
      [](int64_t num_indices, int64_t num_weights, int64_t dim, int64_t grad_elem, int64_t out_elem,
         bool out_rows_packed, int threads, int64_t l1, int64_t l2, int64_t l3, const std::string& isa) {
        const auto t = ops::embedding_dense_backward_tiling(num_indices, num_weights, dim, grad_elem, out_elem,
                                                            out_rows_packed,
                                                            py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("num_indices"), py::arg("num_weights"), py::arg("dim"), py::arg("grad_elem"), py::arg("out_elem"),
      py::arg("out_rows_packed"), py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}
