// The native C++ API of GELU and GeGLU: tilegrad::gelu / gelu_backward (both forms, broadcast, in place)
// and tilegrad::ge_glu / ge_glu_backward (both directions) over TensorView, against float64 computed
// here from the formulas (specification sections 11 and 12), and tilegrad::Error with status and message.
#include <cmath>
#include <cstdint>
#include <vector>

#include "expect.h"
#include "expect_error.hpp"
#include "tilegrad/tilegrad.hpp"

namespace {

using tilegrad::DType;
using tilegrad::GeluApproximate;
using tilegrad::TensorView;

const double kPi = 3.14159265358979323846;

double gelu_ref(double x, GeluApproximate a) {
  if (a == GeluApproximate::kNone) return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
}

double gelu_grad_ref(double x, GeluApproximate a) {
  if (a == GeluApproximate::kNone)
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x / std::sqrt(2.0 * kPi) * std::exp(-0.5 * x * x);
  const double c = std::sqrt(2.0 / kPi), t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// Relative 1e-5 with an absolute floor: the values here stay away from the derivative's root.
bool close(double got, double want) { return std::fabs(got - want) <= 1e-5 * std::fabs(want) + 1e-6; }

void test_gelu() {
  const int n = 301;
  std::vector<float> x(n), dy(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i - 150) * 0.041f;
    dy[i] = 0.5f + 0.01f * static_cast<float>(i % 13);
  }
  for (GeluApproximate a : {GeluApproximate::kNone, GeluApproximate::kTanh}) {
    std::vector<float> y(n), dx(n);
    tilegrad::gelu(TensorView(x.data(), DType::kFloat32, {n}), a, TensorView(y.data(), DType::kFloat32, {n}));
    tilegrad::gelu_backward(TensorView(dy.data(), DType::kFloat32, {n}), TensorView(x.data(), DType::kFloat32, {n}),
                            a, TensorView(dx.data(), DType::kFloat32, {n}));
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      bad += !close(y[i], gelu_ref(x[i], a));
      bad += !close(dx[i], dy[i] * gelu_grad_ref(x[i], a));
    }
    EXPECT(bad == 0);
    // in place, and a broadcast gradOutput of one element
    std::vector<float> z = x;
    tilegrad::gelu(TensorView(z.data(), DType::kFloat32, {n}), a, TensorView(z.data(), DType::kFloat32, {n}));
    EXPECT(z == y);
    float two = 2.0f;
    tilegrad::gelu_backward(TensorView(&two, DType::kFloat32, {1}), TensorView(x.data(), DType::kFloat32, {n}), a,
                            TensorView(dx.data(), DType::kFloat32, {n}));
    bad = 0;
    for (int i = 0; i < n; ++i) bad += !close(dx[i], 2.0 * gelu_grad_ref(x[i], a));
    EXPECT(bad == 0);
  }
  const tilegrad::OutputSpec spec = tilegrad::gelu_backward_output_spec(
      TensorView(dy.data(), DType::kFloat16, {1, n}), TensorView(x.data(), DType::kFloat32, {3, 1}));
  EXPECT(spec.dtype == DType::kFloat32 && spec.shape == std::vector<int64_t>({3, n}));
}

void test_ge_glu() {
  const int rows = 3, half = 37;
  std::vector<float> x(rows * 2 * half), dy(rows * half);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 41) - 20) * 0.13f;
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 1.0f - 0.02f * static_cast<float>(i % 9);
  for (bool left : {false, true}) {
    const GeluApproximate a = left ? GeluApproximate::kTanh : GeluApproximate::kNone;
    std::vector<float> out(rows * half), g(rows * half), dx(x.size());
    const TensorView vx(x.data(), DType::kFloat32, {rows, 2 * half});
    const tilegrad::OutputSpec spec = tilegrad::ge_glu_output_spec(vx, -1);
    EXPECT(spec.shape == std::vector<int64_t>({rows, half}));
    tilegrad::ge_glu(vx, -1, a, left, TensorView(out.data(), DType::kFloat32, {rows, half}),
                     TensorView(g.data(), DType::kFloat32, {rows, half}));
    tilegrad::ge_glu_backward(TensorView(dy.data(), DType::kFloat32, {rows, half}), vx,
                              TensorView(g.data(), DType::kFloat32, {rows, half}), 1, a, left,
                              TensorView(dx.data(), DType::kFloat32, {rows, 2 * half}));
    int bad = 0;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < half; ++j) {
        const double first = x[r * 2 * half + j], second = x[r * 2 * half + half + j];
        const double h = left ? first : second, l = left ? second : first, d = dy[r * half + j];
        bad += !close(g[r * half + j], gelu_ref(h, a));
        bad += !close(out[r * half + j], gelu_ref(h, a) * l);
        const double dh = d * l * gelu_grad_ref(h, a), dl = d * g[r * half + j];
        bad += !close(dx[r * 2 * half + j], left ? dh : dl);
        bad += !close(dx[r * 2 * half + half + j], left ? dl : dh);
      }
    EXPECT(bad == 0);
  }
}

void test_errors() {
  std::vector<float> x(12, 1.0f), y(12), h(6);
  const TensorView vx(x.data(), DType::kFloat32, {2, 6}), vy(y.data(), DType::kFloat32, {2, 6});
  expect_error(__LINE__, [&] { tilegrad::gelu(vx, static_cast<GeluApproximate>(7), vy); }, 161002,
               "aclnnGeluV2: approximate must be 0 (none) or 1 (tanh), got 7");
  expect_error(__LINE__, [&] { tilegrad::gelu(vx, GeluApproximate::kNone, TensorView(y.data(), DType::kFloat32, {12})); },
               161002, "aclnnGeluV2: y shape [12] != x shape [2,6]");
  expect_error(__LINE__, [&] {
    tilegrad::ge_glu(TensorView(x.data(), DType::kFloat32, {3, 4}), 0, GeluApproximate::kTanh, true,
                     TensorView(h.data(), DType::kFloat32, {1, 4}), TensorView(y.data(), DType::kFloat32, {1, 4}));
  }, 161002, "aclnnGeGluV3: self shape[0] must be even, got 3");
  expect_error(__LINE__, [&] {
    tilegrad::ge_glu_backward(TensorView(h.data(), DType::kFloat32, {2, 3}), vx, TensorView(h.data(), DType::kFloat32, {2, 3}),
                              -1, static_cast<GeluApproximate>(-1), false, vy);
  }, 161002, "aclnnGeGluV3Backward: approximate must be 0 (none) or 1 (tanh), got -1");
}

}  // namespace

int main() {
  test_gelu();
  test_ge_glu();
  test_errors();
  return expect_report("cpp_api_gelu");
}
