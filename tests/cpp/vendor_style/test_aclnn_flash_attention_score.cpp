/* CANN sample for aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad (C++11, vendor headers
 * only). The vendor document's shape (SBH, Sq = Skv = 256, one head of 128; here 2 query heads over
 * one kv head, float16) with the compressed 2048 x 2048 causal mask and sparseMode 2, scaleValue
 * 1/sqrt(128); then the grad from the forward's softmaxMax / softmaxSum / attentionOut. Each result
 * is checked against float64 computed here from the documents' formulas:
 *   S = scale Q K^T, masked j > i, P = softmax(S), O = P V,
 *   dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK = scale dS^T Q. */
#include <cmath>
#include <vector>

#include "aclnn_flash_attention_score.h"
#include "aclnn_flash_attention_score_grad.h"
#include "aclnn/opdev/fp16_t.h"
#include "sample_common.h"

namespace {

const int64_t kSeq = 256, kHeads = 2, kDim = 128;

// Element (s, n, d) of an SBH tensor with one batch.
inline size_t At(int64_t s, int64_t n, int64_t d, int64_t heads) { return static_cast<size_t>((s * heads + n) * kDim + d); }

struct Reference {
  std::vector<double> out, dq, dk, dv;
};

Reference AttentionReference(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             const std::vector<double>& dy, double scale) {
  Reference r;
  r.out.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  std::vector<double> p(kSeq), dp(kSeq);
  for (int64_t n = 0; n < kHeads; ++n) {
    for (int64_t i = 0; i < kSeq; ++i) {
      double mx = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0.0;
        for (int64_t d = 0; d < kDim; ++d) s += q[At(i, n, d, kHeads)] * k[At(j, 0, d, 1)];
        p[j] = scale * s;
        mx = std::fmax(mx, p[j]);
      }
      for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
      double rowdot = 0.0;
      for (int64_t d = 0; d < kDim; ++d) {
        double o = 0.0;
        for (int64_t j = 0; j <= i; ++j) o += p[j] / sum * v[At(j, 0, d, 1)];
        r.out[At(i, n, d, kHeads)] = o;
        rowdot += o * dy[At(i, n, d, kHeads)];
      }
      for (int64_t j = 0; j <= i; ++j) {
        p[j] /= sum;
        double s = 0.0;
        for (int64_t d = 0; d < kDim; ++d) s += dy[At(i, n, d, kHeads)] * v[At(j, 0, d, 1)];
        dp[j] = p[j] * (s - rowdot);
        for (int64_t d = 0; d < kDim; ++d) {
          r.dv[At(j, 0, d, 1)] += p[j] * dy[At(i, n, d, kHeads)];
          r.dq[At(i, n, d, kHeads)] += scale * dp[j] * k[At(j, 0, d, 1)];
          r.dk[At(j, 0, d, 1)] += scale * dp[j] * q[At(i, n, d, kHeads)];
        }
      }
    }
  }
  return r;
}

int FlashAttentionSample(aclrtStream stream) {
  const std::vector<int64_t> qShape = {kSeq, 1, kHeads * kDim}, kvShape = {kSeq, 1, kDim};
  const std::vector<int64_t> maskShape = {2048, 2048}, statsShape = {1, kHeads, kSeq, 8};
  const std::vector<op::fp16_t> qHost = StoredAs<op::fp16_t>(Wave(kSeq * kHeads * kDim, 1.5, 0.3));
  const std::vector<op::fp16_t> kHost = StoredAs<op::fp16_t>(Wave(kSeq * kDim, 1.5, 1.7));
  const std::vector<op::fp16_t> vHost = StoredAs<op::fp16_t>(Wave(kSeq * kDim, 1.0, 0.9));
  const std::vector<op::fp16_t> dyHost = StoredAs<op::fp16_t>(Wave(kSeq * kHeads * kDim, 1.0, 2.3));
  std::vector<uint8_t> maskHost(2048 * 2048, 0);
  for (int64_t i = 0; i < 2048; ++i)
    for (int64_t j = i + 1; j < 2048; ++j) maskHost[static_cast<size_t>(i * 2048 + j)] = 1;

  SampleTensors tensors;
  aclTensor* q = tensors.Create(qHost, qShape, ACL_FLOAT16);
  aclTensor* k = tensors.Create(kHost, kvShape, ACL_FLOAT16);
  aclTensor* v = tensors.Create(vHost, kvShape, ACL_FLOAT16);
  aclTensor* dy = tensors.Create(dyHost, qShape, ACL_FLOAT16);
  aclTensor* mask = tensors.Create(maskHost, maskShape, ACL_UINT8);
  aclTensor* out = tensors.Zeros<op::fp16_t>(qShape, ACL_FLOAT16);
  aclTensor* softmaxMax = tensors.Zeros<float>(statsShape, ACL_FLOAT);
  aclTensor* softmaxSum = tensors.Zeros<float>(statsShape, ACL_FLOAT);
  aclTensor* dq = tensors.Zeros<op::fp16_t>(qShape, ACL_FLOAT16);
  aclTensor* dk = tensors.Zeros<op::fp16_t>(kvShape, ACL_FLOAT16);
  aclTensor* dv = tensors.Zeros<op::fp16_t>(kvShape, ACL_FLOAT16);
  CHECK_RET(q && k && v && dy && mask && out && softmaxMax && softmaxSum && dq && dk && dv, return 1);

  std::vector<int64_t> prefixOp = {0};
  aclIntArray* prefix = aclCreateIntArray(prefixOp.data(), 1);
  const double scaleValue = 1.0 / std::sqrt(static_cast<double>(kDim));
  char layout[5] = {'S', 'B', 'H', 0};
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  aclnnStatus ret = aclnnFlashAttentionScoreGetWorkspaceSize(
      q, k, v, nullptr, nullptr, nullptr, mask, prefix, scaleValue, 1.0, 65536, 65536, kHeads, layout, 0, 2,
      softmaxMax, softmaxSum, nullptr, out, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnFlashAttentionScore", ret, workspaceSize, executor, aclnnFlashAttentionScore,
                          stream) == 0,
            aclDestroyIntArray(prefix);
            return 1);
  ret = aclnnFlashAttentionScoreGradGetWorkspaceSize(
      q, k, v, dy, nullptr, nullptr, nullptr, mask, softmaxMax, softmaxSum, nullptr, out, prefix, scaleValue, 1.0,
      65536, 65536, kHeads, layout, 0, 2, dq, dk, dv, nullptr, &workspaceSize, &executor);
  aclDestroyIntArray(prefix);
  CHECK_RET(LaunchAndWait("aclnnFlashAttentionScoreGrad", ret, workspaceSize, executor,
                          aclnnFlashAttentionScoreGrad, stream) == 0,
            return 1);

  std::vector<op::fp16_t> outResult, dqResult, dkResult, dvResult;
  CHECK_RET(tensors.Read(out, &outResult) == 0 && tensors.Read(dq, &dqResult) == 0 &&
                tensors.Read(dk, &dkResult) == 0 && tensors.Read(dv, &dvResult) == 0,
            return 1);
  const Reference want = AttentionReference(AsDouble(qHost), AsDouble(kHost), AsDouble(vHost), AsDouble(dyHost),
                                            scaleValue);
  // float16 outputs rounded once from float32 arithmetic: one fp16 ulp plus fp32 noise of the scale.
  const double rtol = 1.0 / 1024;
  return CheckClose("attentionOut", outResult, want.out, rtol, 2e-3 * MaxAbs(want.out)) +
         CheckClose("dq", dqResult, want.dq, rtol, 2e-3 * MaxAbs(want.dq)) +
         CheckClose("dk", dkResult, want.dk, rtol, 2e-3 * MaxAbs(want.dk)) +
         CheckClose("dv", dvResult, want.dv, rtol, 2e-3 * MaxAbs(want.dv));
}

}  // namespace

int main() { return RunSample("aclnnFlashAttentionScore", FlashAttentionSample); }
