// Python binding of aclnnBinaryCrossEntropyWithLogits:
// tilegrad._core.binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
// reduction="mean", out=None); reduction is "none"/"mean"/"sum" or the aclnn codes 0/1/2.
#include <pybind11/pybind11.h>

#include <string>

#include "ops/binary_cross_entropy_with_logits/binary_cross_entropy_with_logits_tiling.h"
#include "py_args.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/binary_cross_entropy_with_logits.hpp"

namespace {
constexpr const char* kOp = "aclnnBinaryCrossEntropyWithLogits";
}

void bind_binary_cross_entropy_with_logits(py::module_& m) {
  m.def(
      "binary_cross_entropy_with_logits",
      [](const py::object& input, const py::object& target, const py::object& weight, const py::object& pos_weight,
         const py::object& reduction, const py::object& out) {
        const TensorView x = py_support::view_of(input, "input");
        const TensorView t = py_support::view_of(target, "target");
        const TensorView w = py_support::optional_view_of(weight, "weight");
        const TensorView pw = py_support::optional_view_of(pos_weight, "pos_weight");
        const Reduction red = py_support::reduction_of(kOp, reduction, /*accept_codes=*/true);
        py::object result =
            out.is_none()
                ? py::object(py_support::allocate(binary_cross_entropy_with_logits_output_spec(x, t, w, pw, red), kOp,
                                                  "out"))
                : out;
        const TensorView o = py_support::view_of(result, "out", true);
        {
          py::gil_scoped_release release;
          binary_cross_entropy_with_logits(x, t, w, pw, red, o);
        }
        return result;
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("pos_weight") = py::none(),
      py::arg("reduction") = "mean", py::arg("out") = py::none());

  m.def(
      "_binary_cross_entropy_with_logits_tiling",
      [](int64_t numel, int64_t bytes_per_elem, bool out_contiguous, int64_t reduction, int threads, int64_t l1,
         int64_t l2, int64_t l3, const std::string& isa) {
        const auto t = ops::bce_forward_tiling(numel, bytes_per_elem, out_contiguous, reduction,
                                               py_support::platform_from(threads, l1, l2, l3, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("out_contiguous"), py::arg("reduction"),
      py::arg("threads"), py::arg("l1_bytes") = 32 << 10, py::arg("l2_bytes") = 1 << 20,
      py::arg("l3_bytes") = 32 << 20, py::arg("isa") = "avx512");
}
