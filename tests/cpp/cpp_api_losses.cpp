// The native C++ API of the loss operators: one tilegrad::Reduction for cross entropy, binary cross
// entropy and the fused linear cross entropy (values against double-precision formulas), a value
// cast from outside the enum rejected with the aclnn message, and "optional tensor given" meaning
// anything but TensorView{}: a view with data but no dtype is an error naming it in every family.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "expect.h"
#include "expect_error.hpp"
#include "tilegrad/tilegrad.hpp"

namespace {

using tilegrad::DType;
using tilegrad::Reduction;
using tilegrad::TensorView;

bool close(double got, double want) { return std::fabs(got - want) <= 1e-5 * (1.0 + std::fabs(want)); }

// Expects fn() to throw tilegrad::Error 161002 (invalid argument) with a message containing `needle`.
template <class Fn>
void expect_invalid(int line, Fn&& fn, const std::string& needle) {
  expect_error(line, fn, 161002, needle);
}

double logsumexp(const double* x, int n) {
  double m = x[0], s = 0;
  for (int j = 1; j < n; ++j) m = std::fmax(m, x[j]);
  for (int j = 0; j < n; ++j) s += std::exp(x[j] - m);
  return m + std::log(s);
}

// Two rows of three classes; row i's loss is lse_i - x[i, t_i].
const std::vector<float> kLogits = {0.0f, 1.0f, 2.0f, 3.0f, 1.0f, -1.0f};
const std::vector<int64_t> kTargets = {2, 0};

double ce_row_loss(int i) {
  double row[3];
  for (int j = 0; j < 3; ++j) row[j] = kLogits[i * 3 + j];
  return logsumexp(row, 3) - row[kTargets[i]];
}

void test_cross_entropy() {
  std::vector<float> x = kLogits, log_prob(6), loss(2), dx(6);
  std::vector<int64_t> t = kTargets;
  const TensorView vx(x.data(), DType::kFloat32, {2, 3}), vt(t.data(), DType::kInt64, {2});
  const TensorView vlp(log_prob.data(), DType::kFloat32, {2, 3});
  const double want_sum = ce_row_loss(0) + ce_row_loss(1);

  tilegrad::CrossEntropyOptions o;
  o.reduction = Reduction::kNone;
  tilegrad::cross_entropy_loss(vx, vt, TensorView{}, o, TensorView(loss.data(), DType::kFloat32, {2}), vlp,
                               TensorView{}, TensorView{});
  EXPECT(close(loss[0], ce_row_loss(0)) && close(loss[1], ce_row_loss(1)));
  EXPECT(tilegrad::cross_entropy_loss_output_specs(vx, vt, Reduction::kNone).loss.shape ==
         std::vector<int64_t>{2});
  for (Reduction r : {Reduction::kSum, Reduction::kMean}) {
    o.reduction = r;
    tilegrad::cross_entropy_loss(vx, vt, TensorView{}, o, TensorView(loss.data(), DType::kFloat32, {}), vlp,
                                 TensorView{}, TensorView{});
    EXPECT(close(loss[0], r == Reduction::kSum ? want_sum : want_sum / 2));
    EXPECT(tilegrad::cross_entropy_loss_output_specs(vx, vt, r).loss.shape.empty());
  }

  // Gradient of the mean: (softmax - onehot) / N.
  float one = 1.0f;
  tilegrad::cross_entropy_loss_grad(TensorView(&one, DType::kFloat32, {}), vlp, vt, TensorView{}, TensorView{},
                                    TensorView{}, o, TensorView(dx.data(), DType::kFloat32, {2, 3}));
  int bad = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      const double p = std::exp(kLogits[i * 3 + j] - (kLogits[i * 3 + kTargets[i]] + ce_row_loss(i)));
      bad += !close(dx[i * 3 + j], (p - (j == kTargets[i])) / 2);
    }
  EXPECT(bad == 0);

  // A reduction cast from outside the enum, and a weight with data but no dtype.
  o.reduction = static_cast<Reduction>(7);
  const std::string bad_reduction = "reduction must be 0 (none), 1 (mean) or 2 (sum), got 7";
  expect_invalid(__LINE__, [&] {
    tilegrad::cross_entropy_loss(vx, vt, TensorView{}, o, TensorView(loss.data(), DType::kFloat32, {}), vlp,
                                 TensorView{}, TensorView{});
  }, "aclnnCrossEntropyLoss: " + bad_reduction);
  expect_invalid(__LINE__, [&] {
    tilegrad::cross_entropy_loss_grad(TensorView(&one, DType::kFloat32, {}), vlp, vt, TensorView{}, TensorView{},
                                      TensorView{}, o, TensorView(dx.data(), DType::kFloat32, {2, 3}));
  }, "aclnnCrossEntropyLossGrad: " + bad_reduction);
  expect_invalid(__LINE__, [&] { tilegrad::cross_entropy_loss_output_specs(vx, vt, o.reduction); }, bad_reduction);
  o.reduction = Reduction::kMean;
  std::vector<float> w(3, 1.0f);
  expect_invalid(__LINE__, [&] {
    tilegrad::cross_entropy_loss(vx, vt, TensorView(w.data(), DType::kUndefined, {3}), o,
                                 TensorView(loss.data(), DType::kFloat32, {}), vlp, TensorView{}, TensorView{});
  }, "weightOptional dtype must be one of {float32}");
}

void test_binary_cross_entropy() {
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f}, t = {1.0f, 0.0f, 1.0f, 0.0f}, out(4);
  float dy = 1.0f;
  const TensorView vdy(&dy, DType::kFloat32, {}), vx(x.data(), DType::kFloat32, {4});
  const TensorView vt(t.data(), DType::kFloat32, {4}), vout(out.data(), DType::kFloat32, {4});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    tilegrad::binary_cross_entropy_with_logits_backward(vdy, vx, vt, TensorView{}, TensorView{}, r, vout);
    int bad = 0;
    for (int i = 0; i < 4; ++i)
      bad += !close(out[i], (1.0 / (1.0 + std::exp(-x[i])) - t[i]) / (r == Reduction::kMean ? 4.0 : 1.0));
    EXPECT(bad == 0);
  }
  expect_invalid(__LINE__, [&] {
    tilegrad::binary_cross_entropy_with_logits_backward(vdy, vx, vt, TensorView{}, TensorView{},
                                                        static_cast<Reduction>(-1), vout);
  }, "aclnnBinaryCrossEntropyWithLogitsBackward: reduction must be 0 (none), 1 (mean) or 2 (sum), got -1");
  std::vector<float> w(4, 1.0f);
  expect_invalid(__LINE__, [&] {
    tilegrad::binary_cross_entropy_with_logits_backward(vdy, vx, vt, TensorView(w.data(), DType::kUndefined, {4}),
                                                        TensorView{}, Reduction::kMean, vout);
  }, "weightOptional dtype must be one of");
}

void test_fused_linear_cross_entropy() {
  // input (2, 3) @ weight (4, 3)^T: logits (2, 4); targets 1 and 3.
  std::vector<float> in = {0.5f, -1.0f, 0.25f, 1.5f, 0.0f, -0.5f};
  std::vector<float> wt = {1.0f, 0.0f, 0.5f, -1.0f, 2.0f, 0.0f, 0.0f, 0.5f, 1.0f, 0.25f, -0.75f, 1.0f};
  std::vector<int64_t> t = {1, 3};
  std::vector<float> loss(2), gin(6), gw(12);
  double want[2];
  for (int i = 0; i < 2; ++i) {
    double logits[4];
    for (int v = 0; v < 4; ++v) {
      logits[v] = 0;
      for (int h = 0; h < 3; ++h) logits[v] += double(in[i * 3 + h]) * wt[v * 3 + h];
    }
    want[i] = logsumexp(logits, 4) - logits[t[i]];
  }
  const TensorView vin(in.data(), DType::kFloat32, {2, 3}), vw(wt.data(), DType::kFloat32, {4, 3});
  const TensorView vt(t.data(), DType::kInt64, {2}), vgin(gin.data(), DType::kFloat32, {2, 3});
  const TensorView vgw(gw.data(), DType::kFloat32, {4, 3});
  const TensorView per_row(loss.data(), DType::kFloat32, {2}), scalar(loss.data(), DType::kFloat32, {});
  tilegrad::fused_linear_cross_entropy(vin, vw, vt, -100, Reduction::kNone, per_row, vgin, vgw);
  EXPECT(close(loss[0], want[0]) && close(loss[1], want[1]));
  tilegrad::fused_linear_cross_entropy(vin, vw, vt, -100, Reduction::kSum, scalar, vgin, vgw);
  EXPECT(close(loss[0], want[0] + want[1]));
  tilegrad::fused_linear_cross_entropy(vin, vw, vt, -100, Reduction::kMean, scalar, vgin, vgw);
  EXPECT(close(loss[0], (want[0] + want[1]) / 2));
  expect_invalid(__LINE__, [&] {
    tilegrad::fused_linear_cross_entropy(vin, vw, vt, -100, static_cast<Reduction>(3), scalar, vgin, vgw);
  }, "fused_linear_cross_entropy: reduction must be 0 (none), 1 (mean) or 2 (sum), got 3");
  // Class weights with data but no dtype: an error, never silently "no class weights".
  std::vector<float> cw(4, 1.0f);
  const TensorView vcw(cw.data(), DType::kUndefined, {4});
  tilegrad::FusedLinearCrossEntropyOptions o;
  o.class_weight = &vcw;
  expect_invalid(__LINE__, [&] {
    tilegrad::fused_linear_cross_entropy_ex(vin, vw, vt, -100, Reduction::kMean, scalar, vgin, vgw, o);
  }, "class_weight dtype must be one of");
}

}  // namespace

int main() {
  test_cross_entropy();
  test_binary_cross_entropy();
  test_fused_linear_cross_entropy();
  return expect_report("cpp_api_losses");
}
