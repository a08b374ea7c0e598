// linear: y = x @ weight^T + bias (README.md, specification section 11). Native C++ API; the GEMM
// is core::gemm (thread-count independent blocks of single-threaded oneDNN calls).
#include <vector>

#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "core/platform.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "ops/matmul/linear/linear_checks.h"
#include "ops/matmul/linear/linear_elements.h"
#include "tilegrad/linear.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "tilegrad.linear";
// The TILEGRAD_VERBOSE line names it as the registry does (its `name`), like tilegrad's other operators.
constexpr const char* kTraceName = "linear";

void validate_inputs(const TensorView& x, const TensorView& weight, const TensorView& bias) {
  linear::require_matrix(kOp, "x", x, "x", x);
  linear::require_matrix(kOp, "weight", weight, "x", x);
  if (weight.shape[1] != x.shape[1])
    core::fail(Status::kParamInvalid, kOp, ": weight shape ", shape_str(weight.shape), " must be [N, ", x.shape[1],
               "] (x.shape[1]), x shape ", shape_str(x.shape));
  if (core::present(bias)) linear::require_vector(kOp, "bias", bias, weight.shape[0], "x", x);
}

void validate(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& out) {
  validate_inputs(x, weight, bias);
  linear::require_matrix(kOp, "out", out, "x", x);
  core::require_shape(kOp, "out", out, {x.shape[0], weight.shape[0]}, "[x.shape[0], weight.shape[0]] =");
  linear::require_gemm_layout(kOp, "x", x);
  linear::require_gemm_layout(kOp, "weight", weight);
  linear::require_gemm_layout(kOp, "out", out);
  linear::require_output(kOp, "out", out, {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
}

// dst[r, j] = bias[j] for an fp32 matrix dst of bias.shape[0] columns and any 2-D strides.
void fill_with_bias(const TensorView& bias, const core::GemmMatrix& dst, int threads) {
  std::vector<float> b(dst.cols);
  for (int64_t j = 0; j < dst.cols; ++j) b[j] = linear::load_f32(bias.dtype, bias.data, j * bias.strides[0]);
  float* d = static_cast<float*>(dst.data);
  core::parallel_for(dst.rows, threads, [&](int64_t r) {
    for (int64_t j = 0; j < dst.cols; ++j) d[r * dst.row_stride + j * dst.col_stride] = b[j];
  });
}

class LinearLaunch final : public core::Launch {
 public:
  LinearLaunch(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& out)
      : x_(x), weight_(weight), bias_(bias), out_(out), threads_(core::Platform::current().threads) {
    validate(x, weight, bias, out);
    // A 16-bit output with a bias is summed in an fp32 buffer first: one rounding of x @ w^T + b.
    if (core::present(bias) && x.dtype != DType::kFloat32)
      workspace_bytes_ = static_cast<uint64_t>(out.numel()) * sizeof(float);
    trace_.record(kTraceName, {{"x", &x}, {"weight", &weight}, {"bias", &bias}, {"out", &out}});
    core::trace_gemm(trace_, x.dtype);
  }

  uint64_t workspace_bytes() const override { return workspace_bytes_; }

  void run(void* workspace) override {
    const int64_t m = out_.shape[0], n = out_.shape[1];
    if (m == 0 || n == 0) return;
    const core::GemmMatrix a = linear::gemm_matrix(x_), b = linear::gemm_matrix(weight_).t();
    if (!core::present(bias_)) return core::gemm(a, b, linear::gemm_matrix(out_), false, threads_);
    if (x_.dtype == DType::kFloat32) {
      // out holds the bias, the GEMM adds x @ w^T to it (oneDNN's sum post-op, fp32, one rounding).
      const core::GemmMatrix c = linear::gemm_matrix(out_);
      fill_with_bias(bias_, c, threads_);
      return core::gemm(a, b, c, true, threads_);
    }
    const core::GemmMatrix y = core::GemmMatrix::rowmajor(workspace, DType::kFloat32, m, n, n);
    fill_with_bias(bias_, y, threads_);
    core::gemm(a, b, y, true, threads_);
    linear::round_matrix(static_cast<const float*>(workspace), out_, threads_);
  }

 private:
  TensorView x_, weight_, bias_, out_;
  int threads_;
  uint64_t workspace_bytes_ = 0;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec linear_output_spec(const TensorView& x, const TensorView& weight, const TensorView& bias) {
  ops::validate_inputs(x, weight, bias);
  return {x.dtype, {x.shape[0], weight.shape[0]}};
}

void linear(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& out) {
  ops::LinearLaunch launch(x, weight, bias, out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad
