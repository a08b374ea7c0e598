// Python binding of aclnnCrossEntropyLoss: tilegrad._core.cross_entropy_loss(...) -> (loss, log_prob, zloss, lse).
#include <pybind11/pybind11.h>

#include "ops/loss/cross_entropy/cross_entropy_loss_tiling.h"
#include "py_args.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/cross_entropy.hpp"

constexpr const char* kOp = "aclnnCrossEntropyLoss";

void bind_cross_entropy_loss(py::module_& m) {
  m.def(
      "cross_entropy_loss",
      [](const py::object& input, const py::object& target, const py::object& weight, const py::object& reduction,
         int64_t ignore_index, double label_smoothing, double lse_square_scale_for_zloss, bool return_zloss,
         const py::object& out) {
        const TensorView x = py_support::view_of(input, "input");
        const TensorView t = py_support::view_of(target, "target");
        const TensorView w = py_support::optional_view_of(weight, "weight");
        const CrossEntropyOptions o{py_support::reduction_of(kOp, reduction), ignore_index, label_smoothing,
                                    lse_square_scale_for_zloss};
        const CrossEntropyLossOutputSpecs specs = cross_entropy_loss_output_specs(x, t, o.reduction);
        py::array loss = py_support::allocate(specs.loss, kOp, "loss");
        py::object log_prob = out.is_none() ? py::object(py_support::allocate(specs.log_prob, kOp, "log_prob")) : out;
        py::object zloss = py::none(), lse = py::none();
        TensorView zv, lv;
        if (return_zloss) {
          zloss = py_support::allocate(specs.zloss, kOp, "zloss");
          lse = py_support::allocate(specs.lse_for_zloss, kOp, "lse_for_zloss");
          zv = py_support::view_of(zloss, "zloss", true);
          lv = py_support::view_of(lse, "lse_for_zloss", true);
        }
        const TensorView lossv = py_support::view_of(loss, "loss", true);
        const TensorView lpv = py_support::view_of(log_prob, "log_prob", true);
        {
          py::gil_scoped_release release;
          cross_entropy_loss(x, t, w, o, lossv, lpv, zv, lv);
        }
        return py::make_tuple(loss, log_prob, zloss, lse);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("reduction") = "mean",
      py::arg("ignore_index") = -100, py::arg("label_smoothing") = 0.0, py::arg("lse_square_scale_for_zloss") = 0.0,
      py::arg("return_zloss") = false, py::arg("out") = py::none());

  m.def(
      "_cross_entropy_loss_tiling",
      [](int64_t rows, int64_t cols, int64_t in_elem_bytes, int64_t out_elem_bytes, bool out_contiguous, int threads,
         int64_t l1, int64_t l2, int64_t l3, const std::string& isa) {
        const auto t = ops::cross_entropy_loss_tiling(rows, cols, in_elem_bytes, out_elem_bytes, out_contiguous,
                                                      py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("rows"), py::arg("cols"), py::arg("in_elem_bytes"), py::arg("out_elem_bytes"), py::arg("out_contiguous"),
      py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}
