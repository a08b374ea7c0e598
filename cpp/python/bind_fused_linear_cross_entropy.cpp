// Python binding of the single-process fused linear cross entropy, plus the tiling test hooks of
// the whole family (_flce_forward_tiling, _flce_grad_tiling).
#include <pybind11/pybind11.h>

#include "core/gemm.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_tiling.h"
#include "py_args.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/fused_linear_cross_entropy.hpp"

namespace {

// The operator the tiling hooks' errors name.
constexpr const char* kHook = "fused_linear_cross_entropy";

core::Platform platform(int threads, const std::string& isa) {
  return py_support::platform_from(threads, 32 << 10, 1 << 20, 32 << 20, isa);
}
}  // namespace

void bind_fused_linear_cross_entropy(py::module_& m) {
  m.def(
      "fused_linear_cross_entropy",
      [](const py::object& input, const py::object& weight, const py::object& target, int64_t ignore_index,
         const py::object& reduction_arg, const py::object& bias, const py::object& class_weight, float label_smoothing,
         float lse_square_scale, float softcap, const py::object& grad_output, int64_t memory_budget,
         float filter_eps, float filter_tolerance, bool grad_input_wanted, bool grad_weight_wanted,
         bool grad_bias_wanted, bool filter_weight_average) {
        const TensorView x = py_support::view_of(input, "input");
        const TensorView w = py_support::view_of(weight, "weight");
        const TensorView t = py_support::view_of(target, "target");
        const TensorView vb = py_support::optional_view_of(bias, "bias");
        const TensorView vcw = py_support::optional_view_of(class_weight, "class_weight");
        const TensorView vgo = py_support::optional_view_of(grad_output, "grad_output");
        const Reduction reduction = py_support::reduction_of("fused_linear_cross_entropy", reduction_arg);
        const DType dt = core::is_float_dtype(x.dtype) ? x.dtype : DType::kFloat32;
        const int64_t bt = x.rank() >= 1 ? x.shape[0] : 0, h = x.rank() >= 2 ? x.shape[1] : 0;
        const int64_t v = w.rank() >= 1 ? w.shape[0] : 0;
        const std::vector<int64_t> loss_shape =
            reduction == Reduction::kNone ? std::vector<int64_t>{bt} : std::vector<int64_t>{};
        py::array loss = py_support::allocate({DType::kFloat32, loss_shape});
        py::array zl = py_support::allocate({DType::kFloat32, loss_shape});
        // A gradient not wanted is not computed (None is returned for it).
        py::object gi = grad_input_wanted ? py::object(py_support::allocate({dt, {bt, h}})) : py::object(py::none());
        py::object gw = grad_weight_wanted ? py::object(py_support::allocate({dt, {v, h}})) : py::object(py::none());
        const bool has_bias = !bias.is_none() && grad_bias_wanted;
        py::object gb = has_bias ? py::object(py_support::allocate({dt, {v}})) : py::object(py::none());
        const TensorView vl = py_support::view_of(loss, "loss", true);
        const TensorView vz = py_support::view_of(zl, "z_loss", true);
        const TensorView vgi = grad_input_wanted ? py_support::view_of(gi, "grad_input", true) : TensorView{};
        const TensorView vgw = grad_weight_wanted ? py_support::view_of(gw, "grad_weight", true) : TensorView{};
        const TensorView vgb = has_bias ? py_support::view_of(gb, "grad_bias", true) : TensorView{};
        FusedLinearCrossEntropyOptions o;
        o.bias = bias.is_none() ? nullptr : &vb;
        o.class_weight = class_weight.is_none() ? nullptr : &vcw;
        o.label_smoothing = label_smoothing;
        o.lse_square_scale = lse_square_scale;
        o.softcap = softcap;
        o.grad_output = grad_output.is_none() ? nullptr : &vgo;
        o.memory_budget = memory_budget;
        o.grad_bias = has_bias ? &vgb : nullptr;
        o.z_loss = &vz;
        o.filter_eps = filter_eps;
        int64_t filter_blocks[2] = {0, 0};
        o.filter_blocks = filter_blocks;
        o.filter_tolerance = filter_tolerance;
        o.filter_weight_average = filter_weight_average;
        FusedLinearCrossEntropyOptions::FilterStats bounded;
        o.filter_stats = &bounded;
        {
          py::gil_scoped_release release;
          fused_linear_cross_entropy_ex(x, w, t, ignore_index, reduction, vl, vgi, vgw, o);
        }
        py::dict stats;
        stats["blocks"] = bounded.blocks;
        stats["input_blocks_run"] = bounded.input_blocks_run;
        stats["weight_blocks_run"] = bounded.weight_blocks_run;
        stats["max_row_dropped"] = bounded.max_row_dropped;
        stats["max_column_dropped"] = bounded.max_column_dropped;
        return py::make_tuple(loss, gi, gw, gb, zl, py::make_tuple(filter_blocks[0], filter_blocks[1]), stats);
      },
      py::arg("input"), py::arg("weight"), py::arg("target"), py::arg("ignore_index") = -100,
      py::arg("reduction") = "mean", py::arg("bias") = py::none(), py::arg("class_weight") = py::none(),
      py::arg("label_smoothing") = 0.0f, py::arg("lse_square_scale") = 0.0f, py::arg("softcap") = 0.0f,
      py::arg("grad_output") = py::none(), py::arg("memory_budget") = 0, py::arg("filter_eps") = 0.0f,
      py::arg("filter_tolerance") = 0.0f, py::arg("grad_input_wanted") = true, py::arg("grad_weight_wanted") = true,
      py::arg("grad_bias_wanted") = true, py::arg("filter_weight_average") = false);

  m.def(
      "_flce_fused_tiling",
      [](int64_t bt, int64_t h, int64_t v, int64_t dtype_size, int64_t budget, bool gemmable, int threads,
         const std::string& isa) {
        if (budget <= 0) budget = ops::flce_budget();
        const auto t = ops::flce_fused_tiling(kHook, bt, h, v, dtype_size, gemmable, gemmable, true, true, budget,
                                              platform(threads, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("bt"), py::arg("h"), py::arg("v"), py::arg("dtype_size"), py::arg("budget") = 0,
      py::arg("gemmable") = true, py::arg("threads") = 2, py::arg("isa") = "avx512");

  // Benchmark hook: out = a @ b, oneDNN's own multi-threaded call (blocked=False: the plain-matmul
  // ceiling) or the thread-count deterministic blocked GEMM the operators use (blocked=True);
  // returns oneDNN's implementation name.
  m.def(
      "_onednn_matmul",
      [](const py::object& a, const py::object& b, const py::object& out, int threads, bool blocked) {
        const TensorView va = py_support::view_of(a, "a"), vb = py_support::view_of(b, "b");
        const TensorView vc = py_support::view_of(out, "out", true);
        if (va.rank() != 2 || vb.rank() != 2 || vc.rank() != 2) throw py::value_error("2-D arrays expected");
        const auto mat = [](const TensorView& t) {
          return core::GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
        };
        std::string impl;
        {
          py::gil_scoped_release release;
          if (blocked) core::gemm(mat(va), mat(vb), mat(vc), false, threads);
          else core::gemm_plain(mat(va), mat(vb), mat(vc), false, threads);
          impl = core::gemm_implementation(mat(va), mat(vb), mat(vc), false, threads);
        }
        return impl;
      },
      py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"), py::arg("blocked") = false);

  m.def(
      "_flce_forward_tiling",
      [](int64_t bt, int64_t h, int64_t v, int64_t dtype_size, bool input_gemmable, bool weight_gemmable,
         int64_t budget, int threads, const std::string& isa) {
        const auto t = ops::flce_forward_tiling(kHook, bt, h, v, dtype_size, input_gemmable, weight_gemmable, budget,
                                                platform(threads, isa));
        return py_support::tiling_dict(t);
      },
      py::arg("bt"), py::arg("h"), py::arg("v"), py::arg("dtype_size"), py::arg("input_gemmable") = true,
      py::arg("weight_gemmable") = true, py::arg("budget") = ops::kFlceDefaultBudget, py::arg("threads") = 2,
      py::arg("isa") = "avx512");

  m.def(
      "_flce_grad_tiling",
      [](int64_t bt, int64_t h, int64_t v, int64_t dtype_size, bool recompute, bool input_gemmable,
         bool weight_gemmable, bool grad_input_gemmable, bool grad_weight_gemmable, int64_t budget, int threads,
         const std::string& isa, int force_order) {
        const auto t = ops::flce_grad_tiling(kHook, bt, h, v, dtype_size, recompute, input_gemmable, weight_gemmable,
                                             grad_input_gemmable, grad_weight_gemmable, budget, platform(threads, isa),
                                             force_order);
        return py_support::tiling_dict(t);
      },
      py::arg("bt"), py::arg("h"), py::arg("v"), py::arg("dtype_size"), py::arg("recompute") = true,
      py::arg("input_gemmable") = true, py::arg("weight_gemmable") = true, py::arg("grad_input_gemmable") = true,
      py::arg("grad_weight_gemmable") = true, py::arg("budget") = ops::kFlceDefaultBudget, py::arg("threads") = 2,
      py::arg("isa") = "avx512", py::arg("force_order") = 0);
}
