/* CANN sample for aclnnEmbeddingDenseBackward (C++11, vendor headers only): float32 grad (2, 3, D=4),
 * int64 indices (2, 3) with repeats, numWeights 5, paddingIdx 1, scaleGradByFreq. Checks out (5, 4)
 * against float64 computed here: out[r, :] = sum of the grad rows whose index is r (r != paddingIdx),
 * divided by the count of r; rows never hit and the padding row are zero. */
#include <vector>

#include "aclnn_embedding_dense_backward.h"
#include "sample_common.h"

namespace {

const int64_t kRows = 6, D = 4, kNumWeights = 5, kPaddingIdx = 1;

std::vector<double> EmbeddingBackwardReference(const std::vector<double>& grad, const std::vector<int64_t>& indices) {
  std::vector<double> out(kNumWeights * D, 0.0), count(kNumWeights, 0.0);
  for (int64_t i = 0; i < kRows; ++i) count[indices[i]] += 1;
  for (int64_t i = 0; i < kRows; ++i) {
    const int64_t r = indices[i];
    if (r == kPaddingIdx) continue;
    for (int64_t d = 0; d < D; ++d) out[r * D + d] += grad[i * D + d] / count[r];
  }
  return out;
}

int EmbeddingDenseBackwardSample(aclrtStream stream) {
  const std::vector<float> grad = StoredAs<float>(Wave(kRows * D, 1.5, 0.3));
  const std::vector<int64_t> indices = {3, 1, 0, 3, 4, 3};  // row 2 never hit, row 1 is the padding row
  SampleTensors tensors;
  aclTensor* gradTensor = tensors.Create(grad, {2, 3, D}, ACL_FLOAT);
  aclTensor* indicesTensor = tensors.Create(indices, {2, 3}, ACL_INT64);
  aclTensor* out = tensors.Zeros<float>({kNumWeights, D}, ACL_FLOAT);
  CHECK_RET(gradTensor && indicesTensor && out, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnEmbeddingDenseBackwardGetWorkspaceSize(gradTensor, indicesTensor, kNumWeights,
                                                                      kPaddingIdx, true, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnEmbeddingDenseBackward", ret, workspaceSize, executor, aclnnEmbeddingDenseBackward,
                          stream) == 0,
            return 1);

  std::vector<float> result;
  CHECK_RET(tensors.Read(out, &result) == 0, return 1);
  return CheckClose("out", result, EmbeddingBackwardReference(AsDouble(grad), indices), 1e-6, 1e-7);
}

}  // namespace

int main() { return RunSample("aclnnEmbeddingDenseBackward", EmbeddingDenseBackwardSample); }
