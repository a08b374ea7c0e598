// Python binding of aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad:
// tilegrad._core.flash_attention_score(...), tilegrad._core.flash_attention_score_grad(...).
#include <pybind11/pybind11.h>

#include <string>

#include "ops/attention/flash_attention_score/flash_attention_score_tiling.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/flash_attention_score.hpp"

namespace {

constexpr const char* kFwd = "aclnnFlashAttentionScore";
constexpr const char* kBwd = "aclnnFlashAttentionScoreGrad";

FlashAttentionOptions options_of(double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
                                 int64_t head_num, const std::string& input_layout, int64_t inner_precise,
                                 int64_t sparse_mode) {
  return {scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout, inner_precise, sparse_mode};
}

// A tiling test hook over (batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim) + the machine.
template <class TilingFn>
void def_attention_tiling_hook(py::module_& m, const char* name, TilingFn tiling) {
  py_support::def_tiling_hook<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>(
      m, name,
      [tiling](int64_t b, int64_t n1, int64_t n2, int64_t sq, int64_t skv, int64_t d, int64_t dv,
               const core::Platform& p) { return tiling(ops::FlashAttentionShape{b, n1, n2, sq, skv, d, dv}, p); },
      py::arg("batch"), py::arg("heads"), py::arg("kv_heads"), py::arg("q_len"), py::arg("kv_len"), py::arg("head_dim"),
      py::arg("value_dim"));
}

}  // namespace

void bind_flash_attention_score(py::module_& m) {
  m.def(
      "flash_attention_score",
      [](const py::object& q_obj, const py::object& k_obj, const py::object& v_obj, const py::object& mask_obj,
         double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t head_num,
         const std::string& input_layout, int64_t inner_precise, int64_t sparse_mode, const py::object& max_out,
         const py::object& sum_out, const py::object& out) {
        const TensorView q = py_support::view_of(q_obj, "query"), k = py_support::view_of(k_obj, "key"),
                         v = py_support::view_of(v_obj, "value");
        const TensorView mask = py_support::optional_view_of(mask_obj, "atten_mask");
        const FlashAttentionOptions o = options_of(scale_value, keep_prob, pre_tokens, next_tokens, head_num,
                                                   input_layout, inner_precise, sparse_mode);
        FlashAttentionScoreOutputSpecs specs;
        if (max_out.is_none() || sum_out.is_none() || out.is_none()) specs = flash_attention_score_output_specs(q, k, v, o);
        py::object smax = py_support::given_or_allocated(max_out, [&] { return specs.softmax_max; }, kFwd, "softmax_max_out");
        py::object ssum = py_support::given_or_allocated(sum_out, [&] { return specs.softmax_sum; }, kFwd, "softmax_sum_out");
        py::object y = py_support::given_or_allocated(out, [&] { return specs.attention_out; }, kFwd, "out");
        const TensorView mv = py_support::view_of(smax, "softmax_max_out", true);
        const TensorView sv = py_support::view_of(ssum, "softmax_sum_out", true);
        const TensorView yv = py_support::view_of(y, "out", true);
        {
          py::gil_scoped_release release;
          flash_attention_score(q, k, v, TensorView{}, TensorView{}, mask, o, mv, sv, yv);
        }
        return py::make_tuple(y, smax, ssum);
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("atten_mask"), py::arg("scale_value"),
      py::arg("keep_prob"), py::arg("pre_tokens"), py::arg("next_tokens"), py::arg("head_num"),
      py::arg("input_layout"), py::arg("inner_precise"), py::arg("sparse_mode"), py::arg("softmax_max_out") = py::none(),
      py::arg("softmax_sum_out") = py::none(), py::arg("out") = py::none());

  m.def(
      "flash_attention_score_grad",
      [](const py::object& q_obj, const py::object& k_obj, const py::object& v_obj, const py::object& dy_obj,
         const py::object& mask_obj, const py::object& max_obj, const py::object& sum_obj, const py::object& out_obj,
         double scale_value, double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t head_num,
         const std::string& input_layout, int64_t inner_precise, int64_t sparse_mode, const py::object& dq_out,
         const py::object& dk_out, const py::object& dv_out) {
        const TensorView q = py_support::view_of(q_obj, "query"), k = py_support::view_of(k_obj, "key"),
                         v = py_support::view_of(v_obj, "value"), dy = py_support::view_of(dy_obj, "dy");
        const TensorView mask = py_support::optional_view_of(mask_obj, "atten_mask");
        const TensorView smax = py_support::view_of(max_obj, "softmax_max"),
                         ssum = py_support::view_of(sum_obj, "softmax_sum"),
                         attn = py_support::view_of(out_obj, "attention_out");
        const FlashAttentionOptions o = options_of(scale_value, keep_prob, pre_tokens, next_tokens, head_num,
                                                   input_layout, inner_precise, sparse_mode);
        const FlashAttentionScoreGradOutputSpecs specs = flash_attention_score_grad_output_specs(q, k, v);
        py::object dq = py_support::given_or_allocated(dq_out, [&] { return specs.dq; }, kBwd, "dq_out");
        py::object dk = py_support::given_or_allocated(dk_out, [&] { return specs.dk; }, kBwd, "dk_out");
        py::object dv = py_support::given_or_allocated(dv_out, [&] { return specs.dv; }, kBwd, "dv_out");
        const TensorView dqv = py_support::view_of(dq, "dq_out", true), dkv = py_support::view_of(dk, "dk_out", true),
                         dvv = py_support::view_of(dv, "dv_out", true);
        {
          py::gil_scoped_release release;
          flash_attention_score_grad(q, k, v, dy, TensorView{}, TensorView{}, mask, smax, ssum, attn, o, dqv, dkv, dvv);
        }
        return py::make_tuple(dq, dk, dv);
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("dy"), py::arg("atten_mask"),
      py::arg("softmax_max"), py::arg("softmax_sum"), py::arg("attention_out"), py::arg("scale_value"),
      py::arg("keep_prob"), py::arg("pre_tokens"), py::arg("next_tokens"), py::arg("head_num"),
      py::arg("input_layout"), py::arg("inner_precise"), py::arg("sparse_mode"), py::arg("dq_out") = py::none(),
      py::arg("dk_out") = py::none(), py::arg("dv_out") = py::none());

  def_attention_tiling_hook(m, "_flash_attention_score_tiling", ops::flash_attention_score_tiling);
  def_attention_tiling_hook(m, "_flash_attention_score_grad_tiling", ops::flash_attention_score_grad_tiling);
}
