// The native C++ API: tilegrad::silu_backward over TensorView (contiguous, broadcast, negative and
// stepped strides, in-place, mixed dtypes, every ISA level), tilegrad::Error with status code and
// message, runtime settings, and thread-local C ABI error messages.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "expect.h"
#include "expect_error.hpp"
#include "tilegrad/tilegrad.hpp"

namespace {

// Within 6 float32 ulps of the terms' magnitude |dy| * s * (1 + |x| * (1 - s)) (the result itself
// passes through 0 near x = -1.2785, where no fp32 evaluation is accurate relative to |result|).
bool close_silu(float got, double dy, double x) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  const double want = dy * s * (1.0 + x * (1.0 - s));
  const double scale = std::fabs(dy) * s * (1.0 + std::fabs(x) * (1.0 - s));
  return std::fabs(got - want) <= 6 * 0x1p-23 * scale + 1e-38;
}

uint16_t bf16_bits(float f) {  // exact for the values used here (low 16 bits zero)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

void test_values(const char* isa) {
  using tilegrad::DType;
  using tilegrad::TensorView;
  tilegrad::set_max_isa(isa);
  EXPECT(tilegrad::max_isa() == isa);
  EXPECT(tilegrad::active_isa() <= tilegrad::detected_isa());
  // Contiguous, 1000 elements (several SIMD widths plus a tail).
  const int n = 1000;
  std::vector<float> dy(n), x(n), dx(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    dy[i] = 0.25f * static_cast<float>((i % 7) - 3);
    x[i] = static_cast<float>(i - 500) * 0.037f;
  }
  tilegrad::silu_backward(TensorView(dy.data(), DType::kFloat32, {n}), TensorView(x.data(), DType::kFloat32, {n}),
                          TensorView(dx.data(), DType::kFloat32, {n}));
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += !close_silu(dx[i], dy[i], x[i]);
  EXPECT(bad == 0);

  // Broadcast: dy [10,1], x [1,100] -> dx [10,100]; x walked backwards and dy with step 3.
  std::vector<float> out(1000, 0.0f);
  TensorView vdy(dy.data(), DType::kFloat32, {10, 1}, {3, 1});
  TensorView vx(x.data() + 99, DType::kFloat32, {1, 100}, {100, -1});
  tilegrad::silu_backward(vdy, vx, TensorView(out.data(), DType::kFloat32, {10, 100}));
  bad = 0;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 100; ++j) bad += !close_silu(out[i * 100 + j], dy[3 * i], x[99 - j]);
  EXPECT(bad == 0);

  // Transposed output: out[j][i] (strides {1, 10}).
  tilegrad::silu_backward(TensorView(dy.data(), DType::kFloat32, {10, 100}), TensorView(x.data(), DType::kFloat32, {10, 100}),
                          TensorView(out.data(), DType::kFloat32, {10, 100}, {1, 10}));
  bad = 0;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 100; ++j) bad += !close_silu(out[j * 10 + i], dy[i * 100 + j], x[i * 100 + j]);
  EXPECT(bad == 0);

  // In place into x.
  std::vector<float> y = x;
  tilegrad::silu_backward(TensorView(dy.data(), DType::kFloat32, {n}), TensorView(y.data(), DType::kFloat32, {n}),
                          TensorView(y.data(), DType::kFloat32, {n}));
  bad = 0;
  for (int i = 0; i < n; ++i) bad += !close_silu(y[i], dy[i], x[i]);
  EXPECT(bad == 0);

  // Mixed dtypes: bf16 gradOutput, fp32 self -> fp32 gradInput.
  std::vector<uint16_t> dyb(n);
  for (int i = 0; i < n; ++i) dyb[i] = bf16_bits(dy[i]);
  tilegrad::silu_backward(TensorView(dyb.data(), DType::kBFloat16, {n}), TensorView(x.data(), DType::kFloat32, {n}),
                          TensorView(dx.data(), DType::kFloat32, {n}));
  bad = 0;
  for (int i = 0; i < n; ++i) bad += !close_silu(dx[i], dy[i], x[i]);
  EXPECT(bad == 0);

  // Extremes: -1e4 -> -0, +1e4 -> dy, +-inf and NaN -> NaN.
  float ex[5] = {-1e4f, 1e4f, INFINITY, -INFINITY, NAN}, one[5] = {2, 2, 2, 2, 2}, r[5];
  tilegrad::silu_backward(TensorView(one, DType::kFloat32, {5}), TensorView(ex, DType::kFloat32, {5}),
                          TensorView(r, DType::kFloat32, {5}));
  EXPECT(r[0] == 0.0f && std::signbit(r[0]));
  EXPECT(r[1] == 2.0f);
  EXPECT(std::isnan(r[2]) && std::isnan(r[3]) && std::isnan(r[4]));
}

void test_errors() {
  using tilegrad::DType;
  using tilegrad::TensorView;
  float a[8] = {}, b[8] = {}, c[10] = {};
  int32_t ints[8] = {};
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(a, DType::kFloat32, {2, 4}), TensorView(b, DType::kFloat32, {2, 4}),
                            TensorView(c, DType::kFloat32, {2, 5}));
  }, 161002, "aclnnSiluBackward: gradInput shape [2,5] != self shape [2,4]");
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(ints, DType::kInt32, {8}), TensorView(b, DType::kFloat32, {8}),
                            TensorView(c, DType::kFloat32, {8}));
  }, 161002, "gradOutput dtype must be one of {float32, float16, bfloat16}, got int32");
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(nullptr, DType::kFloat32, {8}), TensorView(b, DType::kFloat32, {8}),
                            TensorView(c, DType::kFloat32, {8}));
  }, 161001, "gradOutput data pointer is null but the tensor has 8 elements");
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(a, DType::kFloat32, {8}), TensorView(b, DType::kFloat32, {8}),
                            TensorView(c, DType::kFloat32, {8}, {0}));
  }, 161002, "gradInput has overlapping elements");
  // Shapes or strides whose extent overflows int64 are refused, not wrapped around.
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(a, DType::kFloat32, {int64_t(1) << 62, 4}), TensorView(b, DType::kFloat32, {4}),
                            TensorView(c, DType::kFloat32, {int64_t(1) << 62, 4}));
  }, 161002, "overflows 64-bit indexing");
  expect_error(__LINE__, [&] {
    tilegrad::silu_backward(TensorView(a, DType::kFloat32, {3}, {int64_t(1) << 62}), TensorView(b, DType::kFloat32, {3}),
                            TensorView(c, DType::kFloat32, {3}));
  }, 161002, "gradOutput shape [3] with strides [4611686018427387904] overflows 64-bit indexing");
  expect_error(__LINE__, [&] { tilegrad::silu_backward_output_spec(TensorView(a, DType::kFloat32, {3}), TensorView(b, DType::kFloat32, {4})); },
               161002, "gradOutput shape [3] and self shape [4] do not broadcast");
  expect_error(__LINE__, [&] { tilegrad::set_max_isa("sse9"); }, 161002, "got 'sse9'");
  expect_error(__LINE__, [&] { tilegrad::set_num_threads(0); }, 161002, "n must be >= 1, got 0");

  const tilegrad::OutputSpec spec = tilegrad::silu_backward_output_spec(TensorView(a, DType::kFloat16, {3, 1}),
                                                                        TensorView(b, DType::kBFloat16, {4}));
  EXPECT(spec.dtype == DType::kFloat32 && spec.shape == std::vector<int64_t>({3, 4}));

  // Empty tensors: nothing to do, no error, data pointers may be null.
  tilegrad::silu_backward(TensorView(nullptr, DType::kFloat32, {0, 3}), TensorView(nullptr, DType::kFloat32, {0, 3}),
                          TensorView(nullptr, DType::kFloat32, {0, 3}));
}

// aclGetRecentErrMsg is thread-local: an error on another thread does not change this thread's.
// Reading consumes the message (as the vendor's), so a second read returns "".
void test_thread_local_messages() {
  EXPECT(aclrtSetDevice(5) != ACL_SUCCESS);
  std::string theirs;
  std::thread t([&] {
    aclrtSetDevice(9);
    theirs = aclGetRecentErrMsg();
  });
  t.join();
  EXPECT(theirs.find("got 9") != std::string::npos);
  const std::string mine = aclGetRecentErrMsg();
  EXPECT(mine.find("got 5") != std::string::npos);
  EXPECT(std::string(aclGetRecentErrMsg()).empty());
}

// Results do not depend on the thread count.
void test_threads() {
  using tilegrad::DType;
  using tilegrad::TensorView;
  const int n = 200000;
  std::vector<float> dy(n), x(n), r1(n), r2(n);
  for (int i = 0; i < n; ++i) dy[i] = std::sin(0.1f * i), x[i] = 20.0f * std::cos(0.013f * i);
  const int saved = tilegrad::get_num_threads();
  tilegrad::set_num_threads(1);
  tilegrad::silu_backward(TensorView(dy.data(), DType::kFloat32, {n}), TensorView(x.data(), DType::kFloat32, {n}),
                          TensorView(r1.data(), DType::kFloat32, {n}));
  tilegrad::set_num_threads(2);
  EXPECT(tilegrad::get_num_threads() == 2);
  tilegrad::silu_backward(TensorView(dy.data(), DType::kFloat32, {n}), TensorView(x.data(), DType::kFloat32, {n}),
                          TensorView(r2.data(), DType::kFloat32, {n}));
  EXPECT(std::memcmp(r1.data(), r2.data(), n * sizeof(float)) == 0);
  tilegrad::set_num_threads(saved);
}

}  // namespace

int main() {
  const std::string saved = tilegrad::max_isa();
  for (const char* isa : {"scalar", "avx2", "avx512"}) test_values(isa);
  tilegrad::set_max_isa(saved);
  test_errors();
  test_thread_local_messages();
  test_threads();
  std::printf("build: %s\n", tilegrad::build_info().c_str());
  return expect_report("cpp_api_silu_backward");
}
