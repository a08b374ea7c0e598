/* CANN sample for aclnnRotaryPositionEmbedding (C++11, vendor headers only). First the vendor document's
 * own sample: x, cos, sin of shape (1, 1, 1, 128) float32 with the document's values, mode 1 (interleave).
 * Then a Hugging Face layout in bfloat16: x (B, N, S, D) = (2, 3, 4, 8) with cos / sin (B, 1, S, D)
 * broadcast over the heads, mode 0 (half). Each result is checked against float64 computed here from the
 * document's formulas:
 *   mode 0: y = x * cos + cat(-x2, x1) * sin          (x1, x2 the halves of the last dim)
 *   mode 1: y = x * cos + rot * sin, rot[2i] = -x[2i+1], rot[2i+1] = x[2i]. */
#include <cmath>
#include <vector>

#include "aclnn_rotary_position_embedding.h"
#include "aclnn/opdev/bfloat16.h"
#include "sample_common.h"

namespace {

// float64 reference over a contiguous x (rows of d) and cos / sin rows picked by cosRow(row).
template <typename CosRow>
std::vector<double> RopeReference(const std::vector<double>& x, const std::vector<double>& cos,
                                  const std::vector<double>& sin, int64_t d, int64_t mode, CosRow cosRow) {
  std::vector<double> y(x.size());
  const int64_t rows = static_cast<int64_t>(x.size()) / d, h = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * d];
    const double* c = &cos[cosRow(r) * d];
    const double* s = &sin[cosRow(r) * d];
    for (int64_t i = 0; i < d; ++i) {
      double rot;
      if (mode == 0) rot = i < h ? -xr[i + h] : xr[i - h];
      else rot = i % 2 == 0 ? -xr[i + 1] : xr[i - 1];
      y[r * d + i] = xr[i] * c[i] + rot * s[i];
    }
  }
  return y;
}

int64_t SameRow(int64_t) { return 0; }

int DocumentSample(aclrtStream stream) {
  const std::vector<int64_t> shape = {1, 1, 1, 128};
  const int64_t mode = 1;
  const std::vector<float> xHostData = {74, 54, 84, 125, 23, 78, 37, 72, 27, 98, 34, 107, 29, 23, 54, 60, 70, 49,
                                        119, 54, 29, 54, 41, 99, 27, 62, 5, 46, 108, 39, 24, 123, 33, 82, 6, 40, 88,
                                        24, 6, 116, 38, 119, 110, 5, 30, 79, 87, 18, 29, 100, 90, 24, 21, 93, 63, 68,
                                        34, 112, 119, 48, 74, 43, 85, 64, 14, 49, 128, 59, 18, 37, 123, 76, 14, 63, 10,
                                        39, 107, 124, 79, 16, 17, 76, 80, 47, 90, 41, 58, 82, 75, 80, 69, 37, 74, 36, 54,
                                        26, 32, 54, 13, 100, 105, 15, 13, 69, 122, 26, 94, 59, 29, 14, 60, 8, 24, 17, 45,
                                        33, 107, 122, 63, 111, 75, 128, 68, 31, 105, 6, 82, 99};
  const std::vector<float> cosHostData = {41, 37, 17, 25, 49, 25, 22, 24, 110, 120, 107, 3, 82, 66, 75, 86, 85, 115, 110, 56, 52,
                                          39, 86, 23, 36, 71, 20, 73, 113, 25, 114, 56, 125, 80, 95, 82, 31, 63, 99, 62, 23, 55, 30,
                                          99, 42, 121, 15, 24, 97, 87, 81, 67, 43, 21, 13, 9, 33, 29, 117, 10, 114, 61, 98, 15, 78,
                                          108, 48, 97, 1, 3, 78, 109, 57, 46, 47, 56, 50, 66, 81, 77, 17, 128, 68, 121, 47, 91, 114,
                                          125, 51, 108, 31, 15, 47, 78, 109, 115, 113, 26, 53, 97, 1, 111, 103, 58, 106, 68, 11,
                                          104, 22, 79, 61, 127, 86, 39, 33, 123, 102, 39, 64, 41, 119, 120, 61, 29, 94, 68, 36, 12};
  const std::vector<float> sinHostData = {46, 56, 56, 101, 66, 10, 96, 16, 86, 57, 102, 66, 12, 105, 76, 58, 90, 6, 79, 128, 126,
                                          82, 41, 3, 45, 7, 66, 4, 46, 22, 31, 26, 37, 63, 97, 84, 91, 90, 47, 77, 90, 34, 41, 83,
                                          91, 108, 120, 13, 90, 32, 85, 37, 119, 31, 51, 82, 122, 125, 7, 116, 121, 108, 38, 56,
                                          100, 20, 97, 119, 10, 4, 53, 13, 46, 82, 103, 119, 124, 80, 23, 67, 78, 56, 119, 122, 40,
                                          58, 128, 27, 30, 52, 71, 42, 123, 69, 4, 5, 116, 97, 38, 107, 8, 4, 65, 120, 40, 22, 60,
                                          44, 48, 66, 68, 125, 4, 93, 112, 112, 113, 90, 94, 23, 104, 39, 85, 84, 64, 128, 96, 119};
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHostData, shape, ACL_FLOAT);
  aclTensor* cos = tensors.Create(cosHostData, shape, ACL_FLOAT);
  aclTensor* sin = tensors.Create(sinHostData, shape, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>(shape, ACL_FLOAT);
  CHECK_RET(x && cos && sin && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnRotaryPositionEmbeddingGetWorkspaceSize(x, cos, sin, mode, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnRotaryPositionEmbedding", ret, workspaceSize, executor, aclnnRotaryPositionEmbedding,
                          stream) == 0,
            return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  const std::vector<double> want =
      RopeReference(AsDouble(xHostData), AsDouble(cosHostData), AsDouble(sinHostData), 128, mode, SameRow);
  return CheckClose("out", result, want, 0.0, 0.0);  // integers below 2^24: every product and sum exact
}

int HuggingFaceLayoutBf16(aclrtStream stream) {
  const int64_t b = 2, n = 3, s = 4, d = 8, mode = 0;
  const std::vector<double> xValues = Wave(static_cast<size_t>(b * n * s * d), 2.0, 0.3);
  std::vector<double> cosValues(static_cast<size_t>(b * s * d)), sinValues(cosValues.size());
  for (int64_t bi = 0; bi < b; ++bi)  // positions bi * s + si, frequencies 10000^(-2i/d), as a model makes them
    for (int64_t si = 0; si < s; ++si)
      for (int64_t i = 0; i < d; ++i) {
        const double angle = static_cast<double>(si + bi) * std::pow(10000.0, -2.0 * static_cast<double>(i % (d / 2)) / d);
        cosValues[(bi * s + si) * d + i] = std::cos(angle);
        sinValues[(bi * s + si) * d + i] = std::sin(angle);
      }
  const std::vector<op::bfloat16> xHost = StoredAs<op::bfloat16>(xValues);
  const std::vector<op::bfloat16> cosHost = StoredAs<op::bfloat16>(cosValues);
  const std::vector<op::bfloat16> sinHost = StoredAs<op::bfloat16>(sinValues);
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHost, {b, n, s, d}, ACL_BF16);
  aclTensor* cos = tensors.Create(cosHost, {b, 1, s, d}, ACL_BF16);
  aclTensor* sin = tensors.Create(sinHost, {b, 1, s, d}, ACL_BF16);
  aclTensor* out = tensors.Zeros<op::bfloat16>({b, n, s, d}, ACL_BF16);
  CHECK_RET(x && cos && sin && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnRotaryPositionEmbeddingGetWorkspaceSize(x, cos, sin, mode, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnRotaryPositionEmbedding", ret, workspaceSize, executor, aclnnRotaryPositionEmbedding,
                          stream) == 0,
            return 1);
  std::vector<op::bfloat16> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  // row r = (bi, ni, si) reads cos row (bi, si)
  const std::vector<double> want = RopeReference(AsDouble(xHost), AsDouble(cosHost), AsDouble(sinHost), d, mode,
                                                 [=](int64_t r) { return (r / (n * s)) * s + r % s; });
  return CheckClose("bf16 out", result, want, 1.0 / 128, 1e-6);  // rounded once to bf16 (8 significant bits)
}

int RopeSample(aclrtStream stream) { return DocumentSample(stream) + HuggingFaceLayoutBf16(stream); }

}  // namespace

int main() { return RunSample("aclnnRotaryPositionEmbedding", RopeSample); }
