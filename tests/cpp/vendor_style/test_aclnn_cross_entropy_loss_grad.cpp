/* CANN sample for aclnnCrossEntropyLossGrad (C++11, vendor headers only): float16 logProb (N=4, C=5) held
 * as op::fp16_t, reduction "none" (a gradient per row), class weights, one ignored row, label smoothing 0.1
 * and z-loss 0.01 with its gradZloss and lseForZloss inputs. Checks xGradOut against float64 computed here
 * from the float16 inputs: p = exp(logProb), m_i = (t_i != ignoreIndex),
 *   xGrad_ij = m_i [g_i (1-ls) w[t_i] (p_ij - [j == t_i]) + g_i (ls/C) (p_ij sum_c w_c - w_j)
 *                   + (g_i + gz_i) 2 z lse_i p_ij]. */
#include <cmath>
#include <vector>

#include "aclnn/opdev/fp16_t.h"
#include "aclnn_cross_entropy_loss_grad.h"
#include "sample_common.h"

namespace {

const int64_t N = 4, C = 5, kIgnoreIndex = -100;
const double kLabelSmoothing = 0.1, kZloss = 0.01;

std::vector<double> CrossEntropyGradReference(const std::vector<double>& gradLoss, const std::vector<double>& logProb,
                                              const std::vector<int64_t>& target, const std::vector<double>& w,
                                              const std::vector<double>& gradZloss, const std::vector<double>& lse) {
  double classWeightSum = 0;
  for (int64_t c = 0; c < C; ++c) classWeightSum += w[c];
  std::vector<double> grad(N * C, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (target[i] == kIgnoreIndex) continue;
    for (int64_t j = 0; j < C; ++j) {
      const double p = std::exp(logProb[i * C + j]);
      const double nll = w[target[i]] * (p - (j == target[i] ? 1.0 : 0.0));
      const double smooth = p * classWeightSum - w[j];
      grad[i * C + j] = gradLoss[i] * ((1 - kLabelSmoothing) * nll + kLabelSmoothing / C * smooth) +
                        (gradLoss[i] + gradZloss[i]) * 2 * kZloss * lse[i] * p;
    }
  }
  return grad;
}

// logProb and lse of some logits, as the forward pass would have stored them.
void LogSoftmax(const std::vector<double>& x, std::vector<double>* logProb, std::vector<double>* lse) {
  for (int64_t i = 0; i < N; ++i) {
    double sumExp = 0;
    for (int64_t c = 0; c < C; ++c) sumExp += std::exp(x[i * C + c]);
    (*lse)[i] = std::log(sumExp);
    for (int64_t c = 0; c < C; ++c) (*logProb)[i * C + c] = x[i * C + c] - (*lse)[i];
  }
}

int CrossEntropyLossGradSample(aclrtStream stream) {
  std::vector<double> logProbExact(N * C), lseExact(N);
  LogSoftmax(Wave(N * C, 2.5, 1.1), &logProbExact, &lseExact);
  const std::vector<op::fp16_t> logProb = StoredAs<op::fp16_t>(logProbExact);
  const std::vector<op::fp16_t> lse = StoredAs<op::fp16_t>(lseExact);
  const std::vector<op::fp16_t> gradLoss = StoredAs<op::fp16_t>(Wave(N, 1.0, 0.4, 0.5));
  const std::vector<op::fp16_t> gradZloss = StoredAs<op::fp16_t>(Wave(N, 0.5, 2.0));
  const std::vector<int64_t> target = {3, kIgnoreIndex, 0, 2};
  const std::vector<float> weight = {0.5f, 1.0f, 2.0f, 1.5f, 1.0f};
  SampleTensors tensors;
  aclTensor* gradLossTensor = tensors.Create(gradLoss, {N}, ACL_FLOAT16);
  aclTensor* logProbTensor = tensors.Create(logProb, {N, C}, ACL_FLOAT16);
  aclTensor* targetTensor = tensors.Create(target, {N}, ACL_INT64);
  aclTensor* weightTensor = tensors.Create(weight, {C}, ACL_FLOAT);
  aclTensor* gradZlossTensor = tensors.Create(gradZloss, {N}, ACL_FLOAT16);
  aclTensor* lseTensor = tensors.Create(lse, {N}, ACL_FLOAT16);
  aclTensor* xGradOut = tensors.Zeros<op::fp16_t>({N, C}, ACL_FLOAT16);
  CHECK_RET(gradLossTensor && logProbTensor && targetTensor && weightTensor && gradZlossTensor && lseTensor && xGradOut,
            return 1);

  char reduction[] = "none";
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnCrossEntropyLossGradGetWorkspaceSize(
      gradLossTensor, logProbTensor, targetTensor, weightTensor, gradZlossTensor, lseTensor, reduction, kIgnoreIndex,
      kLabelSmoothing, kZloss, xGradOut, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnCrossEntropyLossGrad", ret, workspaceSize, executor, aclnnCrossEntropyLossGrad,
                          stream) == 0,
            return 1);

  std::vector<op::fp16_t> xGrad;
  CHECK_RET(tensors.Read(xGradOut, &xGrad) == 0, return 1);
  const std::vector<double> want = CrossEntropyGradReference(AsDouble(gradLoss), AsDouble(logProb), target,
                                                             AsDouble(weight), AsDouble(gradZloss), AsDouble(lse));
  // float16 output: one rounding (2^-11 relative) after float32 arithmetic, plus slack for cancellation.
  return CheckClose("xGradOut", xGrad, want, 2e-3, 2e-3 * MaxAbs(want));
}

}  // namespace

int main() { return RunSample("aclnnCrossEntropyLossGrad", CrossEntropyLossGradSample); }
