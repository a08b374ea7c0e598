// Python binding of aclnnFusedAdamw: tilegrad._core.fused_adamw(params, grads, exp_avgs, exp_avg_sqs,
// max_exp_avg_sqs, state_steps, ...), in place; returns the gradient norm when max_grad_norm is given.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <optional>

#include "ops/optim/adamw/fused_adamw_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/adamw.hpp"

namespace {

std::vector<TensorView> views_of(const py::handle& seq, const char* arg, bool output) {
  std::vector<TensorView> out;
  if (seq.is_none()) return out;
  if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq))
    throw py::type_error(std::string("fused_adamw: ") + arg + " must be a list of numpy.ndarray, got " +
                         std::string(py::str(py::type::handle_of(seq).attr("__name__"))));
  size_t i = 0;
  for (const py::handle item : seq.cast<py::sequence>()) {
    const std::string name = std::string(arg) + "[" + std::to_string(i++) + "]";
    out.push_back(py_support::view_of(item, name.c_str(), output));
  }
  return out;
}

// One call's arguments, in the order of tilegrad._core.fused_adamw's signature.
struct FusedAdamwCall {
  py::object params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps;
  double lr, beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize;
  py::object grad_scale, found_inf;
  std::optional<double> max_grad_norm;
  py::object model_params;
  std::optional<double> grad_norm;
};

// The gradient norm when max_grad_norm is given, else None.
py::object fused_adamw_call(const FusedAdamwCall& c) {
  const std::vector<TensorView> p = views_of(c.params, "params", true), g = views_of(c.grads, "grads", false),
                                ea = views_of(c.exp_avgs, "exp_avgs", true),
                                es = views_of(c.exp_avg_sqs, "exp_avg_sqs", true),
                                mx = views_of(c.max_exp_avg_sqs, "max_exp_avg_sqs", true),
                                st = views_of(c.state_steps, "state_steps", false);
  FusedAdamWExtras x;
  x.grad_scale = py_support::optional_view_of(c.grad_scale, "grad_scale");
  x.found_inf = py_support::optional_view_of(c.found_inf, "found_inf");
  if (c.max_grad_norm) x.max_grad_norm = *c.max_grad_norm;
  if (c.grad_norm) x.grad_norm = *c.grad_norm;
  x.model_params = views_of(c.model_params, "model_params", true);
  const AdamWOptions o{c.lr, c.beta1, c.beta2, c.weight_decay, c.eps, c.amsgrad, c.maximize};
  double norm;
  {
    py::gil_scoped_release release;
    norm = fused_adamw(p, g, ea, es, mx, st, o, x);
  }
  if (!c.max_grad_norm) return py::none();
  return py::float_(norm);
}

}  // namespace

void bind_fused_adamw(py::module_& m) {
  m.def(
      "fused_adamw",
      [](py::object params, py::object grads, py::object exp_avgs, py::object exp_avg_sqs, py::object max_exp_avg_sqs,
         py::object state_steps, double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
         bool maximize, py::object grad_scale, py::object found_inf, std::optional<double> max_grad_norm,
         py::object model_params, std::optional<double> grad_norm) {
        return fused_adamw_call({params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                                 weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, max_grad_norm,
                                 model_params, grad_norm});
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"),
      py::arg("state_steps"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("weight_decay"),
      py::arg("eps"), py::arg("amsgrad"), py::arg("maximize"), py::arg("grad_scale") = py::none(),
      py::arg("found_inf") = py::none(), py::arg("max_grad_norm") = py::none(), py::arg("model_params") = py::none(),
      py::arg("grad_norm") = py::none());

  m.def(
      "adamw_grad_norm",
      [](const py::object& grads) {
        const std::vector<TensorView> g = views_of(grads, "grads", false);
        py::gil_scoped_release release;
        return adamw_grad_norm(g);
      },
      py::arg("grads"));

  m.def(
      "_fused_adamw_tiling",
      [](const std::vector<int64_t>& numel, const std::vector<int64_t>& bytes_per_elem, int threads,
         const std::string& isa) {
        if (numel.size() != bytes_per_elem.size()) throw py::value_error("numel and bytes_per_elem differ in length");
        for (size_t i = 0; i < numel.size(); ++i)
          if (numel[i] < 0 || bytes_per_elem[i] <= 0) throw py::value_error("numel >= 0 and bytes_per_elem > 0 required");
        const auto t = ops::adamw::adamw_tiling(numel, bytes_per_elem,
                                                py_support::platform_from(threads, 32 << 10, 1 << 20, 32 << 20, isa));
        py::dict d = py_support::tiling_dict(t);
        py::list tiles;
        for (int k = 0; k < t.num_tiles; ++k) {
          py::list segs;
          for (int64_t j = t.tile_begin[k]; j < t.tile_begin[k + 1]; ++j)
            segs.append(py::make_tuple(t.segments[j].slot, t.segments[j].begin, t.segments[j].end));
          tiles.append(segs);
        }
        d["tiles"] = tiles;
        return d;
      },
      py::arg("numel"), py::arg("bytes_per_elem"), py::arg("threads"), py::arg("isa") = "avx512");
}
