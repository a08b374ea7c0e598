// Python binding of aclnnCrossEntropyLossGrad: tilegrad._core.cross_entropy_loss_grad(...) -> x_grad.
#include <pybind11/pybind11.h>

#include "ops/loss/cross_entropy/cross_entropy_loss_grad_tiling.h"
#include "py_args.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/cross_entropy.hpp"

constexpr const char* kOp = "aclnnCrossEntropyLossGrad";

void bind_cross_entropy_loss_grad(py::module_& m) {
  m.def(
      "cross_entropy_loss_grad",
      [](const py::object& grad_loss, const py::object& log_prob, const py::object& target, const py::object& weight,
         const py::object& grad_zloss, const py::object& lse_for_zloss, const py::object& reduction,
         int64_t ignore_index, double label_smoothing, double lse_square_scale_for_zloss, const py::object& out) {
        const TensorView g = py_support::view_of(grad_loss, "grad_loss");
        const TensorView lp = py_support::view_of(log_prob, "log_prob");
        const TensorView t = py_support::view_of(target, "target");
        const TensorView w = py_support::optional_view_of(weight, "weight");
        const TensorView gz = py_support::optional_view_of(grad_zloss, "grad_zloss");
        const TensorView lse = py_support::optional_view_of(lse_for_zloss, "lse_for_zloss");
        const CrossEntropyOptions o{py_support::reduction_of(kOp, reduction), ignore_index, label_smoothing,
                                    lse_square_scale_for_zloss};
        // A new output takes logProb's dtype and shape (validation then reports any dtype problem).
        py::object result = out.is_none() ? py::object(py_support::allocate(OutputSpec{lp.dtype, lp.shape}, kOp, "out")) : out;
        const TensorView dx = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          cross_entropy_loss_grad(g, lp, t, w, gz, lse, o, dx);
        }
        return result;
      },
      py::arg("grad_loss"), py::arg("log_prob"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("grad_zloss") = py::none(), py::arg("lse_for_zloss") = py::none(), py::arg("reduction") = "mean",
      py::arg("ignore_index") = -100, py::arg("label_smoothing") = 0.0, py::arg("lse_square_scale_for_zloss") = 0.0,
      py::arg("out") = py::none());

  m.def(
      "_cross_entropy_loss_grad_tiling",
      [](int64_t rows, int64_t cols, int64_t bytes_per_elem, bool out_contiguous, int threads, int64_t l1, int64_t l2,
         int64_t l3, const std::string& isa) {
        const auto t = ops::cross_entropy_loss_grad_tiling(rows, cols, bytes_per_elem, out_contiguous,
                                                           py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("rows"), py::arg("cols"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("threads"),
      py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20, py::arg("l3_bytes") = 32 << 20,
      py::arg("isa") = "avx512");
}
