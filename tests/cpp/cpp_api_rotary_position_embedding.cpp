// The native C++ API of the rotary position embedding: tilegrad::rotary_position_embedding and
// rotary_position_embedding_grad over TensorView (contiguous, a transposed view, broadcast cos / sin,
// x absent), each value checked against double; tilegrad::Error with the vendor's status codes.
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
using tilegrad::TensorView;

bool close(double got, double want, double scale) { return std::fabs(got - want) <= 4 * 0x1p-24 * scale + 1e-30; }

// x viewed (B, N, S, D) = (2, 3, 4, 6) over (B, S, N, D) memory; cos / sin (1, 1, S, D); mode 0.
void test_forward_and_grad() {
  const int64_t B = 2, N = 3, S = 4, D = 6, H = D / 2;
  std::vector<float> mem(B * S * N * D), cos(S * D), sin(S * D), y(B * N * S * D), dy(y.size()), dx(y.size());
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = 0.25f * static_cast<float>(static_cast<int>(i % 13) - 6);
  for (size_t i = 0; i < cos.size(); ++i) {
    cos[i] = std::cos(0.1f * static_cast<float>(i));
    sin[i] = std::sin(0.1f * static_cast<float>(i));
  }
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f - 0.125f * static_cast<float>(i % 9);
  const TensorView x(mem.data(), DType::kFloat32, {B, N, S, D}, {S * N * D, D, N * D, 1});
  const TensorView c(cos.data(), DType::kFloat32, {1, 1, S, D}), s(sin.data(), DType::kFloat32, {1, 1, S, D});
  tilegrad::rotary_position_embedding(x, c, s, 0, TensorView(y.data(), DType::kFloat32, {B, N, S, D}));
  std::vector<float> dcos(S * D), dsin(S * D);
  tilegrad::rotary_position_embedding_grad(TensorView(dy.data(), DType::kFloat32, {B, N, S, D}), c, s, x, 0,
                                           TensorView(dx.data(), DType::kFloat32, {B, N, S, D}),
                                           TensorView(dcos.data(), DType::kFloat32, {1, 1, S, D}),
                                           TensorView(dsin.data(), DType::kFloat32, {1, 1, S, D}));
  std::vector<double> wcos(S * D, 0.0), wsin(S * D, 0.0), scale(S * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t si = 0; si < S; ++si)
        for (int64_t i = 0; i < D; ++i) {
          const auto xv = [&](int64_t j) { return static_cast<double>(mem[((b * S + si) * N + n) * D + j]); };
          const int64_t row = ((b * N + n) * S + si) * D, cr = si * D;
          const double rot = i < H ? -xv(i + H) : xv(i - H);
          const double want = xv(i) * cos[cr + i] + rot * sin[cr + i];
          EXPECT(close(y[row + i], want, std::fabs(xv(i) * cos[cr + i]) + std::fabs(rot * sin[cr + i])));
          const double g = dy[row + i];
          const double other = i < H ? sin[cr + i + H] * dy[row + i + H] : -(sin[cr + i - H] * dy[row + i - H]);
          EXPECT(close(dx[row + i], cos[cr + i] * g + other, std::fabs(cos[cr + i] * g) + std::fabs(other)));
          wcos[cr + i] += g * xv(i);
          wsin[cr + i] += g * rot;
          scale[cr + i] += std::fabs(g * xv(i)) + std::fabs(g * rot);
        }
  for (int64_t i = 0; i < S * D; ++i) {
    EXPECT(close(dcos[i], wcos[i], 8 * scale[i]));
    EXPECT(close(dsin[i], wsin[i], 8 * scale[i]));
  }
  // Without x: dx alone, the same bits; absent dcos / dsin are fine.
  std::vector<float> dx2(dx.size());
  tilegrad::rotary_position_embedding_grad(TensorView(dy.data(), DType::kFloat32, {B, N, S, D}), c, s, TensorView{},
                                           0, TensorView(dx2.data(), DType::kFloat32, {B, N, S, D}), TensorView{},
                                           TensorView{});
  EXPECT(dx2 == dx);
}

void test_errors() {
  std::vector<float> a(16), b(16);
  const TensorView x(a.data(), DType::kFloat32, {1, 1, 2, 8}), c(b.data(), DType::kFloat32, {1, 1, 2, 8});
  std::vector<float> o(16);
  const TensorView out(o.data(), DType::kFloat32, {1, 1, 2, 8});
  expect_error(__LINE__, [&] { tilegrad::rotary_position_embedding(x, c, c, 4, out); }, 561002,
               "aclnnRotaryPositionEmbedding: mode must be 0 (half), 1 (interleave), 2 (quarter) or 3");
  expect_error(__LINE__, [&] { tilegrad::rotary_position_embedding(x, c, c, 0, TensorView(o.data(), DType::kFloat16, {1, 1, 2, 8})); },
               161002, "out dtype float16 != x dtype float32");
  expect_error(__LINE__, [&] { tilegrad::rotary_position_embedding_grad(x, c, c, x, 0, out, TensorView{}, TensorView{}); },
               161001, "aclnnRotaryPositionEmbeddingGrad: dcosOut must be given when xOptional is");
  const tilegrad::OutputSpec spec = tilegrad::rotary_position_embedding_output_spec(x, c, c, 1);
  EXPECT(spec.dtype == DType::kFloat32 && spec.shape == x.shape);
}

}  // namespace

int main() {
  test_forward_and_grad();
  test_errors();
  return expect_report("cpp_api_rotary_position_embedding");
}
