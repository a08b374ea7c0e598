/* CANN sample for aclnnBinaryCrossEntropyWithLogits (C++11, vendor headers only). First the vendor
 * document's own case: float32 self, target, weight and posWeight of shape (4, 2), reduction 0 (none).
 * Then reduction 1 (mean) over self (3, 5) with weight (5) and posWeight (3, 1) broadcast, into an out
 * of shape [1] with the workspace phase 1 asks for. Checks out against float64 computed here:
 *   l = weight * (posWeight * t * log(1 + exp(-x)) + (1 - t) * log(1 + exp(x))). */
#include <algorithm>
#include <cmath>
#include <vector>

#include "aclnn_binary_cross_entropy_with_logits.h"
#include "sample_common.h"

namespace {

const int64_t kNone = 0, kMean = 1;

// log(1 + exp(z)) without overflow.
double Softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))); }

// Per-element losses of self (rows, cols) with weight and posWeight indexed by (row, col).
template <class Weight, class PosWeight>
std::vector<double> BceWithLogitsReference(const std::vector<double>& x, const std::vector<double>& t, int64_t cols,
                                           Weight weight, PosWeight posWeight) {
  std::vector<double> loss(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const int64_t row = static_cast<int64_t>(k) / cols, col = static_cast<int64_t>(k) % cols;
    loss[k] = weight(row, col) * (posWeight(row, col) * t[k] * Softplus(-x[k]) + (1 - t[k]) * Softplus(x[k]));
  }
  return loss;
}

struct AtIndex {  // a (rows, cols) host array read at (row, col)
  const std::vector<double>* values;
  int64_t cols;
  double operator()(int64_t row, int64_t col) const { return (*values)[row * cols + col]; }
};
struct PerCol {
  const std::vector<double>* values;
  double operator()(int64_t, int64_t col) const { return (*values)[col]; }
};
struct PerRow {
  const std::vector<double>* values;
  double operator()(int64_t row, int64_t) const { return (*values)[row]; }
};

// Both phases of aclnnBinaryCrossEntropyWithLogits, then out's values into *result (float32 out).
int Run(aclrtStream stream, const SampleTensors& tensors, const aclTensor* self, const aclTensor* target,
        const aclTensor* weight, const aclTensor* posWeight, int64_t reduction, aclTensor* out, uint64_t* workspaceSize,
        std::vector<float>* result) {
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(self, target, weight, posWeight, reduction,
                                                                            out, workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnBinaryCrossEntropyWithLogits", ret, *workspaceSize, executor,
                          aclnnBinaryCrossEntropyWithLogits, stream) == 0,
            return 1);
  return tensors.Read(out, result);
}

int VendorDocumentCase(aclrtStream stream) {
  const std::vector<int64_t> shape = {4, 2};
  const std::vector<float> input = {0.1f, 0.1f, 0.2f, 0.2f, 0.3f, 0.3f, 0.4f, 0.4f};
  const std::vector<float> target = {0.2f, 0.2f, 0.1f, 0.1f, 0.2f, 0.2f, 0.1f, 0.1f};
  const std::vector<float> weight(8, 0.5f), posWeight(8, 0.5f);
  SampleTensors tensors;
  aclTensor* selfTensor = tensors.Create(input, shape, ACL_FLOAT);
  aclTensor* targetTensor = tensors.Create(target, shape, ACL_FLOAT);
  aclTensor* weightTensor = tensors.Create(weight, shape, ACL_FLOAT);
  aclTensor* posWeightTensor = tensors.Create(posWeight, shape, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>(shape, ACL_FLOAT);
  CHECK_RET(selfTensor && targetTensor && weightTensor && posWeightTensor && out, return 1);

  uint64_t workspaceSize = 0;
  std::vector<float> result;
  CHECK_RET(Run(stream, tensors, selfTensor, targetTensor, weightTensor, posWeightTensor, kNone, out, &workspaceSize,
                &result) == 0,
            return 1);
  const std::vector<double> w = AsDouble(weight), pw = AsDouble(posWeight);
  const std::vector<double> want =
      BceWithLogitsReference(AsDouble(input), AsDouble(target), 2, AtIndex{&w, 2}, AtIndex{&pw, 2});
  return CheckClose("none", result, want, 1e-6, 1e-7);
}

int BroadcastMeanCase(aclrtStream stream) {
  const int64_t rows = 3, cols = 5;
  const std::vector<float> input = StoredAs<float>(Wave(rows * cols, 6.0, 0.4));
  const std::vector<float> target = StoredAs<float>(Wave(rows * cols, 0.5, 1.1, 0.5));
  const std::vector<float> weight = {1.0f, 0.5f, 2.0f, 0.25f, 1.5f};
  const std::vector<float> posWeight = {3.0f, 1.0f, 0.5f};
  SampleTensors tensors;
  aclTensor* selfTensor = tensors.Create(input, {rows, cols}, ACL_FLOAT);
  aclTensor* targetTensor = tensors.Create(target, {rows, cols}, ACL_FLOAT);
  aclTensor* weightTensor = tensors.Create(weight, {cols}, ACL_FLOAT);
  aclTensor* posWeightTensor = tensors.Create(posWeight, {rows, 1}, ACL_FLOAT);
  aclTensor* out = tensors.Zeros<float>({1}, ACL_FLOAT);
  CHECK_RET(selfTensor && targetTensor && weightTensor && posWeightTensor && out, return 1);

  uint64_t workspaceSize = 0;
  std::vector<float> result;
  CHECK_RET(Run(stream, tensors, selfTensor, targetTensor, weightTensor, posWeightTensor, kMean, out, &workspaceSize,
                &result) == 0,
            return 1);
  CHECK_RET(workspaceSize > 0, LOG_PRINT("mean: expected a workspace for the block sums\n"); return 1);
  const std::vector<double> w = AsDouble(weight), pw = AsDouble(posWeight);
  const std::vector<double> loss =
      BceWithLogitsReference(AsDouble(input), AsDouble(target), cols, PerCol{&w}, PerRow{&pw});
  double mean = 0.0;
  for (size_t k = 0; k < loss.size(); ++k) mean += loss[k];
  mean /= static_cast<double>(loss.size());
  return CheckClose("mean", result, std::vector<double>(1, mean), 1e-6, 0.0);
}

int BceWithLogitsSample(aclrtStream stream) { return VendorDocumentCase(stream) + BroadcastMeanCase(stream); }

}  // namespace

int main() { return RunSample("aclnnBinaryCrossEntropyWithLogits", BceWithLogitsSample); }
