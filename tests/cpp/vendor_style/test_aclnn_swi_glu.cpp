/* CANN sample for aclnnSwiGlu (C++11, vendor headers only): the vendor document's sample, x (2, 32) float32
 * holding 0, 1, 2, ... (the document lists 64 values for these 64 elements), dim -1, out (2, 16). Checked
 * against float64 computed here from the document's formula: (a, b) = the halves of each row,
 *   out = silu(a) * b = a / (1 + exp(-a)) * b. */
#include <cmath>
#include <vector>

#include "aclnn_swi_glu.h"
#include "sample_common.h"

namespace {

int DocumentSample(aclrtStream stream) {
  const int64_t rows = 2, half = 16;
  std::vector<float> xHostData(static_cast<size_t>(rows * 2 * half));
  for (size_t i = 0; i < xHostData.size(); ++i) xHostData[i] = static_cast<float>(i);
  const int64_t dim = -1;
  SampleTensors tensors;
  aclTensor* x = tensors.Create(xHostData, {rows, 2 * half}, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>({rows, half}, ACL_FLOAT);
  CHECK_RET(x && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnSwiGluGetWorkspaceSize(x, dim, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnSwiGlu", ret, workspaceSize, executor, aclnnSwiGlu, stream) == 0, return 1);
  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  std::vector<double> want(static_cast<size_t>(rows * half));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double a = xHostData[r * 2 * half + i], b = xHostData[r * 2 * half + half + i];
      want[r * half + i] = a / (1.0 + std::exp(-a)) * b;
    }
  return CheckClose("out", result, want, 1e-6, 0.0);
}

}  // namespace

int main() { return RunSample("aclnnSwiGlu", DocumentSample); }
