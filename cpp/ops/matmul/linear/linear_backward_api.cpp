// linear_backward: dx = dy @ weight, dweight = dy^T @ x, dbias = column sums of dy (README.md,
// specification section 11). Native C++ API; the GEMMs are core::gemm, dbias is core's fixed-order
// column sum (RowBlocks), so every result is independent of the thread count.
#include <vector>

#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/ordered_reduce.h"
#include "core/parallel.h"
#include "core/platform.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "core/workspace.h"
#include "ops/matmul/linear/linear_checks.h"
#include "ops/matmul/linear/linear_elements.h"
#include "tilegrad/linear.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "tilegrad.linear_backward";
// The TILEGRAD_VERBOSE line names it as the registry does (its `name`), like tilegrad's other operators.
constexpr const char* kTraceName = "linear_backward";

void validate(const TensorView& dy, const TensorView& x, const TensorView& weight, const LinearGrads& g) {
  linear::require_matrix(kOp, "grad_output", dy, "grad_output", dy);
  linear::require_matrix(kOp, "x", x, "grad_output", dy);
  linear::require_matrix(kOp, "weight", weight, "grad_output", dy);
  const int64_t m = x.shape[0], k = x.shape[1], n = weight.shape[0];
  core::require_shape(kOp, "weight", weight, {n, k}, "[N, x.shape[1]] =");
  core::require_shape(kOp, "grad_output", dy, {m, n}, "[x.shape[0], weight.shape[0]] =");
  linear::require_gemm_layout(kOp, "grad_output", dy);
  linear::require_gemm_layout(kOp, "x", x);
  linear::require_gemm_layout(kOp, "weight", weight);
  const std::pair<const char*, const TensorView*> inputs[] = {{"grad_output", &dy}, {"x", &x}, {"weight", &weight}};
  const std::pair<const char*, const TensorView*> outputs[] = {
      {"grad_input", &g.grad_input}, {"grad_weight", &g.grad_weight}, {"grad_bias", &g.grad_bias}};
  const std::vector<int64_t> shapes[] = {{m, k}, {n, k}, {n}};
  for (int i = 0; i < 3; ++i) {
    const auto& [name, out] = outputs[i];
    if (!core::present(*out)) continue;
    core::require_well_formed(kOp, name, *out);
    core::require_same_dtype(kOp, name, *out, "grad_output", dy);
    core::require_shape(kOp, name, *out, shapes[i], i == 2 ? "[weight.shape[0]] =" : "the input's shape");
    if (i < 2) linear::require_gemm_layout(kOp, name, *out);
    linear::require_output(kOp, name, *out, {inputs[0], inputs[1], inputs[2]});
    for (int j = 0; j < i; ++j)
      if (core::present(*outputs[j].second))
        core::require_no_partial_overlap(kOp, name, *out, outputs[j].first, *outputs[j].second, false);
  }
}

class LinearBackwardLaunch final : public core::Launch {
 public:
  LinearBackwardLaunch(const TensorView& dy, const TensorView& x, const TensorView& weight, const LinearGrads& g)
      : dy_(dy), x_(x), weight_(weight), g_(g), threads_(core::Platform::current().threads) {
    validate(dy, x, weight, g);
    if (core::present(g.grad_bias)) {
      blocks_ = core::plan_row_blocks(dy.shape[0], dy.shape[1]);
      sums_offset_ = core::align64(kOp, "grad_bias partials", blocks_.workspace_bytes());
      workspace_bytes_ = static_cast<uint64_t>(sums_offset_ + dy.shape[1] * int64_t{sizeof(float)});
    }
    trace_.record(kTraceName, {{"grad_output", &dy}, {"x", &x}, {"weight", &weight}, {"grad_input", &g.grad_input},
                        {"grad_weight", &g.grad_weight}, {"grad_bias", &g.grad_bias}});
    core::trace_gemm(trace_, dy.dtype);
  }

  uint64_t workspace_bytes() const override { return workspace_bytes_; }

  void run(void* workspace) override {
    const core::GemmMatrix dy = linear::gemm_matrix(dy_);
    // No rows (M == 0) give zero grad_weight and grad_bias: gemm zero-fills for an empty K loop.
    if (core::present(g_.grad_input))
      core::gemm(dy, linear::gemm_matrix(weight_), linear::gemm_matrix(g_.grad_input), false, threads_);
    if (core::present(g_.grad_weight))
      core::gemm(dy.t(), linear::gemm_matrix(x_), linear::gemm_matrix(g_.grad_weight), false, threads_);
    if (core::present(g_.grad_bias)) column_sums(static_cast<char*>(workspace));
  }

 private:
  // grad_bias[c] = sum over rows r of dy[r, c]: each fixed block of rows in fp32, in row order,
  // then the blocks in order in double (core::sum_row_block_partials), rounded once.
  void column_sums(char* workspace) {
    const int64_t cols = dy_.shape[1];
    core::parallel_for(blocks_.num_blocks, threads_, [&](int64_t b) {
      float* p = blocks_.partial(workspace, b);
      for (int64_t c = 0; c < cols; ++c) p[c] = 0.0f;
      for (int64_t r = blocks_.begin(b); r < blocks_.end(b); ++r)
        for (int64_t c = 0; c < cols; ++c)
          p[c] += linear::load_f32(dy_.dtype, dy_.data, r * dy_.strides[0] + c * dy_.strides[1]);
    });
    float* sums = reinterpret_cast<float*>(workspace + sums_offset_);
    core::sum_row_block_partials(blocks_, workspace, sums, threads_);
    const TensorView& db = g_.grad_bias;
    for (int64_t c = 0; c < cols; ++c) linear::store_rounded(db.dtype, db.data, c * db.strides[0], sums[c]);
  }

  TensorView dy_, x_, weight_;
  LinearGrads g_;
  int threads_;
  core::RowBlocks blocks_;
  int64_t sums_offset_ = 0;
  uint64_t workspace_bytes_ = 0;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

void linear_backward(const TensorView& grad_output, const TensorView& x, const TensorView& weight,
                     const LinearGrads& grads) {
  ops::LinearBackwardLaunch launch(grad_output, x, weight, grads);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad
