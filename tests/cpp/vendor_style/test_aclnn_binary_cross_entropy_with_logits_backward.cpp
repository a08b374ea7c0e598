/* CANN sample for aclnnBinaryCrossEntropyWithLogitsBackward (C++11, vendor headers only): float32 self and
 * target (2, 3), a 0-d gradOutput, weight and posWeight of shape (3) broadcast over the rows, reduction 1
 * (mean). Checks out against float64 computed here: s = sigmoid(x), pt = posWeight * t,
 *   out = ((pt + 1 - t) s - pt) * gradOutput * weight / numel(self). */
#include <cmath>
#include <vector>

#include "aclnn_binary_cross_entropy_with_logits_backward.h"
#include "sample_common.h"

namespace {

const int64_t kRows = 2, kCols = 3;
const int64_t kMean = 1;

std::vector<double> BceWithLogitsGradReference(double gradOutput, const std::vector<double>& x,
                                               const std::vector<double>& t, const std::vector<double>& weight,
                                               const std::vector<double>& posWeight) {
  std::vector<double> out(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const size_t col = k % kCols;
    const double s = 1.0 / (1.0 + std::exp(-x[k]));
    const double pt = posWeight[col] * t[k];
    out[k] = ((pt + 1 - t[k]) * s - pt) * gradOutput * weight[col] / static_cast<double>(x.size());
  }
  return out;
}

int BceWithLogitsBackwardSample(aclrtStream stream) {
  const std::vector<float> gradOutput = {0.75f};
  const std::vector<float> self = StoredAs<float>(Wave(kRows * kCols, 4.0, 0.9));
  const std::vector<float> target = {1.0f, 0.0f, 0.25f, 1.0f, 0.0f, 0.5f};
  const std::vector<float> weight = {1.0f, 0.5f, 2.0f};
  const std::vector<float> posWeight = {3.0f, 1.0f, 0.5f};
  SampleTensors tensors;
  aclTensor* gradOutputTensor = tensors.Create(gradOutput, {}, ACL_FLOAT);
  aclTensor* selfTensor = tensors.Create(self, {kRows, kCols}, ACL_FLOAT);
  aclTensor* targetTensor = tensors.Create(target, {kRows, kCols}, ACL_FLOAT);
  aclTensor* weightTensor = tensors.Create(weight, {kCols}, ACL_FLOAT);
  aclTensor* posWeightTensor = tensors.Create(posWeight, {kCols}, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>({kRows, kCols}, ACL_FLOAT);
  CHECK_RET(gradOutputTensor && selfTensor && targetTensor && weightTensor && posWeightTensor && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(
      gradOutputTensor, selfTensor, targetTensor, weightTensor, posWeightTensor, kMean, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnBinaryCrossEntropyWithLogitsBackward", ret, workspaceSize, executor,
                          aclnnBinaryCrossEntropyWithLogitsBackward, stream) == 0,
            return 1);

  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  const std::vector<double> want = BceWithLogitsGradReference(gradOutput[0], AsDouble(self), AsDouble(target),
                                                              AsDouble(weight), AsDouble(posWeight));
  return CheckClose("out", result, want, 1e-5, 1e-7);
}

}  // namespace

int main() { return RunSample("aclnnBinaryCrossEntropyWithLogitsBackward", BceWithLogitsBackwardSample); }
