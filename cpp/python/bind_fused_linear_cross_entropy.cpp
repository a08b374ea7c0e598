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

// The operator this file's errors name (the tiling hooks' too).
constexpr const char* kHook = "fused_linear_cross_entropy";

core::Platform platform(int threads, const std::string& isa) {
  return py_support::platform_from(threads, 32 << 10, 1 << 20, 32 << 20, isa);
}

// One call's arguments, in the order of tilegrad._core.fused_linear_cross_entropy's signature.
struct FlceCall {
  py::object input, weight, target;
  int64_t ignore_index;
  py::object reduction, bias, class_weight;
  float label_smoothing, lse_square_scale, softcap;
  py::object grad_output;
  int64_t memory_budget;
  float filter_eps, filter_tolerance;
  bool grad_input_wanted, grad_weight_wanted, grad_bias_wanted, filter_weight_average;
};

// The arrays a call returns, allocated (a gradient not wanted, or grad_bias without a bias: None),
// and the views of them the C++ call writes.
struct FlceOutputs {
  py::object loss, z_loss, grad_input, grad_weight, grad_bias;
  TensorView vloss, vz, vgi, vgw, vgb;
};

FlceOutputs allocate_outputs(const FlceCall& c, const TensorView& x, const TensorView& w, Reduction reduction) {
  const DType dt = core::is_float_dtype(x.dtype) ? x.dtype : DType::kFloat32;
  const int64_t bt = x.rank() >= 1 ? x.shape[0] : 0, h = x.rank() >= 2 ? x.shape[1] : 0;
  const int64_t v = w.rank() >= 1 ? w.shape[0] : 0;
  const std::vector<int64_t> loss_shape =
      reduction == Reduction::kNone ? std::vector<int64_t>{bt} : std::vector<int64_t>{};
  const auto allocate_if = [](bool wanted, const OutputSpec& spec) {
    return wanted ? py::object(py_support::allocate(spec)) : py::object(py::none());
  };
  const auto view_if = [](const py::object& a, const char* arg) {
    return a.is_none() ? TensorView{} : py_support::view_of(a, arg, true);
  };
  FlceOutputs o;
  o.loss = py_support::allocate({DType::kFloat32, loss_shape});
  o.z_loss = py_support::allocate({DType::kFloat32, loss_shape});
  o.grad_input = allocate_if(c.grad_input_wanted, {dt, {bt, h}});
  o.grad_weight = allocate_if(c.grad_weight_wanted, {dt, {v, h}});
  o.grad_bias = allocate_if(!c.bias.is_none() && c.grad_bias_wanted, {dt, {v}});
  o.vloss = py_support::view_of(o.loss, "loss", true);
  o.vz = py_support::view_of(o.z_loss, "z_loss", true);
  o.vgi = view_if(o.grad_input, "grad_input");
  o.vgw = view_if(o.grad_weight, "grad_weight");
  o.vgb = view_if(o.grad_bias, "grad_bias");
  return o;
}

py::dict filter_stats_dict(const FusedLinearCrossEntropyOptions::FilterStats& s) {
  py::dict d;
  d["blocks"] = s.blocks;
  d["input_blocks_run"] = s.input_blocks_run;
  d["weight_blocks_run"] = s.weight_blocks_run;
  d["max_row_dropped"] = s.max_row_dropped;
  d["max_column_dropped"] = s.max_column_dropped;
  return d;
}

// (loss, grad_input, grad_weight, grad_bias, z_loss, (active, total) filter blocks, bounded statistics).
py::tuple fused_linear_cross_entropy_call(const FlceCall& c) {
  const TensorView x = py_support::view_of(c.input, "input");
  const TensorView w = py_support::view_of(c.weight, "weight");
  const TensorView t = py_support::view_of(c.target, "target");
  const TensorView vb = py_support::optional_view_of(c.bias, "bias");
  const TensorView vcw = py_support::optional_view_of(c.class_weight, "class_weight");
  const TensorView vgo = py_support::optional_view_of(c.grad_output, "grad_output");
  const Reduction reduction = py_support::reduction_of(kHook, c.reduction);
  const FlceOutputs out = allocate_outputs(c, x, w, reduction);
  FusedLinearCrossEntropyOptions o;
  o.bias = c.bias.is_none() ? nullptr : &vb;
  o.class_weight = c.class_weight.is_none() ? nullptr : &vcw;
  o.label_smoothing = c.label_smoothing;
  o.lse_square_scale = c.lse_square_scale;
  o.softcap = c.softcap;
  o.grad_output = c.grad_output.is_none() ? nullptr : &vgo;
  o.memory_budget = c.memory_budget;
  o.grad_bias = out.grad_bias.is_none() ? nullptr : &out.vgb;
  o.z_loss = &out.vz;
  o.filter_eps = c.filter_eps;
  int64_t filter_blocks[2] = {0, 0};
  o.filter_blocks = filter_blocks;
  o.filter_tolerance = c.filter_tolerance;
  o.filter_weight_average = c.filter_weight_average;
  FusedLinearCrossEntropyOptions::FilterStats bounded;
  o.filter_stats = &bounded;
  {
    py::gil_scoped_release release;
    fused_linear_cross_entropy_ex(x, w, t, c.ignore_index, reduction, out.vloss, out.vgi, out.vgw, o);
  }
  return py::make_tuple(out.loss, out.grad_input, out.grad_weight, out.grad_bias, out.z_loss,
                        py::make_tuple(filter_blocks[0], filter_blocks[1]), filter_stats_dict(bounded));
}

}  // namespace

void bind_fused_linear_cross_entropy(py::module_& m) {
  m.def(
      "fused_linear_cross_entropy",
      [](py::object input, py::object weight, py::object target, int64_t ignore_index, py::object reduction,
         py::object bias, py::object class_weight, float label_smoothing, float lse_square_scale, float softcap,
         py::object grad_output, int64_t memory_budget, float filter_eps, float filter_tolerance,
         bool grad_input_wanted, bool grad_weight_wanted, bool grad_bias_wanted, bool filter_weight_average) {
        return fused_linear_cross_entropy_call({input, weight, target, ignore_index, reduction, bias, class_weight,
                                                label_smoothing, lse_square_scale, softcap, grad_output,
                                                memory_budget, filter_eps, filter_tolerance, grad_input_wanted,
                                                grad_weight_wanted, grad_bias_wanted, filter_weight_average});
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

  // Benchmark hook: out = a @ b (accumulate: out += a @ b), oneDNN's own multi-threaded call
  // (blocked=False: the plain-matmul ceiling) or the thread-count deterministic blocked GEMM the
  // operators use (blocked=True); returns oneDNN's implementation name.
  m.def(
      "_onednn_matmul",
      [](const py::object& a, const py::object& b, const py::object& out, int threads, bool blocked,
         bool accumulate) {
        const TensorView va = py_support::view_of(a, "a"), vb = py_support::view_of(b, "b");
        const TensorView vc = py_support::view_of(out, "out", true);
        if (va.rank() != 2 || vb.rank() != 2 || vc.rank() != 2) throw py::value_error("2-D arrays expected");
        const auto mat = [](const TensorView& t) {
          return core::GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
        };
        std::string impl;
        {
          py::gil_scoped_release release;
          if (blocked) core::gemm(mat(va), mat(vb), mat(vc), accumulate, threads);
          else core::gemm_plain(mat(va), mat(vb), mat(vc), accumulate, threads);
          impl = core::gemm_implementation(mat(va), mat(vb), mat(vc), accumulate, threads);
        }
        return impl;
      },
      py::arg("a"), py::arg("b"), py::arg("out"), py::arg("threads"), py::arg("blocked") = false,
      py::arg("accumulate") = false);

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
