// The README's and the docs' C++ quick start (the part between the snippet markers is shown verbatim:
// tests/test_docs.py checks that the README's block is this text). Checked against the float64 formula.
#include <cmath>
#include <cstdio>
#include <vector>

// --8<-- [start:quickstart]
#include <tilegrad/tilegrad.hpp>

std::vector<float> silu_grad_of_ones() {
  std::vector<float> dy(6, 1.f), x = {1, 2, 3, 4, 5, 6}, dx(6);
  tilegrad::silu_backward({dy.data(), tilegrad::DType::kFloat32, {2, 3}},
                          {x.data(), tilegrad::DType::kFloat32, {2, 3}},
                          {dx.data(), tilegrad::DType::kFloat32, {2, 3}});  // throws tilegrad::Error
  return dx;
}
// --8<-- [end:quickstart]

int main() {
  const std::vector<float> dx = silu_grad_of_ones();
  for (int i = 0; i < 6; ++i) {
    const double x = i + 1, s = 1.0 / (1.0 + std::exp(-x)), want = s * (1.0 + x * (1.0 - s));
    if (std::fabs(dx[i] - want) > 1e-6 * std::fabs(want)) {
      std::printf("docs quickstart: dx[%d] = %.9g, want %.9g\n", i, dx[i], want);
      return 1;
    }
  }
  try {  // a shape mismatch is an exception with the aclnn status, never a crash
    std::vector<float> a(6), b(6), c(6);
    tilegrad::silu_backward({a.data(), tilegrad::DType::kFloat32, {2, 3}},
                            {b.data(), tilegrad::DType::kFloat32, {3, 2}},
                            {c.data(), tilegrad::DType::kFloat32, {2, 3}});
    std::printf("docs quickstart: a shape mismatch did not throw\n");
    return 1;
  } catch (const tilegrad::Error& e) {
    if (e.code() != 161002) {
      std::printf("docs quickstart: status %d, want 161002\n", e.code());
      return 1;
    }
  }
  return 0;
}
