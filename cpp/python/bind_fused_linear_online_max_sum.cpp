// Python binding of aclnnFusedLinearOnlineMaxSum: tilegrad._core.fused_linear_online_max_sum(...).
#include <pybind11/pybind11.h>

#include "core/tensor.h"
#include "py_tensor.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace {
int64_t dim0(const TensorView& t) { return t.rank() >= 1 ? t.shape[0] : 0; }
}  // namespace

void bind_fused_linear_online_max_sum(py::module_& m) {
  m.def(
      "fused_linear_online_max_sum",
      [](const py::object& input, const py::object& weight, const py::object& target, int64_t start, int64_t end,
         bool return_logits) {
        const TensorView x = py_support::view_of(input, "input");
        const TensorView w = py_support::view_of(weight, "weight");
        const TensorView t = py_support::view_of(target, "target");
        const int64_t bt = dim0(x), v = dim0(w);
        const DType idx = t.dtype == DType::kInt32 ? DType::kInt32 : DType::kInt64;
        py::array mx = py_support::allocate({DType::kFloat32, {bt}});
        py::array sum = py_support::allocate({DType::kFloat32, {bt}});
        py::array pred = py_support::allocate({DType::kFloat32, {bt}});
        py::array mask = py_support::allocate({DType::kUInt8, {(bt + 7) / 8}});
        py::array masked = py_support::allocate({idx, {bt}});
        py::object logits = py::none();
        const DType logits_dtype = core::is_float_dtype(x.dtype) ? x.dtype : DType::kFloat32;
        if (return_logits) logits = py_support::allocate({logits_dtype, {bt, v}});
        const TensorView vmx = py_support::view_of(mx, "logits_max", true);
        const TensorView vsum = py_support::view_of(sum, "sum_exp_logits", true);
        const TensorView vpred = py_support::view_of(pred, "predicted_logits", true);
        const TensorView vmask = py_support::view_of(mask, "target_mask", true);
        const TensorView vmasked = py_support::view_of(masked, "masked_target", true);
        const TensorView vlog = py_support::optional_view_of(logits, "logits");
        {
          py::gil_scoped_release release;
          fused_linear_online_max_sum(x, w, t, start, end, vmx, vsum, vpred, vmask, vmasked,
                                      return_logits ? &vlog : nullptr);
        }
        return py::make_tuple(mx, sum, pred, mask, masked, logits);
      },
      py::arg("input"), py::arg("weight"), py::arg("target"), py::arg("vocab_start_index"),
      py::arg("vocab_end_index"), py::arg("return_logits") = false);
}
