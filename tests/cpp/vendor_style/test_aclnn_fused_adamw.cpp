/* CANN sample for aclnnFusedAdamw (C++11, vendor headers only): the document's own data, two
 * parameters of shapes (2, 2, 2) and (2, 2) with steps 3 and 4, gradScale 2, amsgrad on, lr 1e-3,
 * betas 0.9 / 0.999, weightDecay 0, eps 1e-8 (its steps tensors are one element each here: the
 * document's sample gives them the parameters' shape while holding one value). Checks every updated
 * tensor against float64 AdamW computed here (t = step + 1, grads times 1 / gradScale). */
#include <cmath>
#include <vector>

#include "aclnn_fused_adamw.h"
#include "sample_common.h"

namespace {

const double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kWeightDecay = 0, kEps = 1e-8, kGradScale = 2;

struct Param {
  std::vector<int64_t> shape;
  std::vector<float> p, g, m, v, vmax;
  float step;
};

// A second aclTensor over a sample tensor's memory, for a tensor list (a list owns and destroys its
// tensors; the sample keeps its own).
aclTensor* ListTensor(const SampleTensors& tensors, const aclTensor* t, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d > 1; --d) strides[d - 2] = shape[d - 1] * strides[d - 1];
  return aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                         shape.size(), tensors.DeviceAddr(t));
}

int CheckParam(const SampleTensors& tensors, aclTensor* const* t, const Param& in) {
  const double gmul = static_cast<double>(1.0f / static_cast<float>(kGradScale));
  const double s = in.step + 1.0;
  std::vector<double> p(in.p.size()), m(p.size()), v(p.size()), vmax(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double g = in.g[i] * gmul;
    m[i] = kBeta1 * in.m[i] + (1 - kBeta1) * g;
    v[i] = kBeta2 * in.v[i] + (1 - kBeta2) * g * g;
    vmax[i] = std::fmax(in.vmax[i], v[i]);
    const double denom = std::sqrt(vmax[i]) / std::sqrt(1 - std::pow(kBeta2, s)) + kEps;
    p[i] = in.p[i] * (1 - kLr * kWeightDecay) - kLr / (1 - std::pow(kBeta1, s)) * m[i] / denom;
  }
  const std::vector<double>* want[4] = {&p, &m, &v, &vmax};
  const char* names[4] = {"paramsRef", "expAvgsRef", "expAvgSqsRef", "maxExpAvgSqsRef"};
  int failures = 0;
  for (int k = 0; k < 4; ++k) {
    std::vector<float> got;
    CHECK_RET(tensors.Read(t[k], &got) == 0, return 1);
    failures += CheckClose(names[k], got, *want[k], 1e-6, 1e-7);
  }
  return failures;
}

int FusedAdamwSample(aclrtStream stream) {
  const Param params[2] = {
      {{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f},
       {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f},
       {1, 2, 3, 4, 5, 6, 7, 8}, 3},
      {{2, 2}, {9, 10, 11, 12}, {0.9f, 1.0f, 1.1f, 1.2f}, {-1, -2, -3, -4}, {1, 2, 3, 4}, {2, 2, 2, 2}, 4}};
  SampleTensors tensors;
  aclTensor* t[2][5];
  aclTensor* steps[2];
  std::vector<aclTensor*> lists[6];
  for (int i = 0; i < 2; ++i) {
    const Param& q = params[i];
    t[i][0] = tensors.Create(q.p, q.shape, ACL_FLOAT);
    t[i][1] = tensors.Create(q.m, q.shape, ACL_FLOAT);
    t[i][2] = tensors.Create(q.v, q.shape, ACL_FLOAT);
    t[i][3] = tensors.Create(q.vmax, q.shape, ACL_FLOAT);
    t[i][4] = tensors.Create(q.g, q.shape, ACL_FLOAT);
    steps[i] = tensors.Create(std::vector<float>(1, q.step), {1}, ACL_FLOAT);
    for (int k = 0; k < 5; ++k) CHECK_RET(t[i][k], return 1);
    CHECK_RET(steps[i], return 1);
    for (int k = 0; k < 5; ++k) lists[k].push_back(ListTensor(tensors, t[i][k], q.shape));
    lists[5].push_back(ListTensor(tensors, steps[i], {1}));
  }
  aclTensor* gradScale = tensors.Create(std::vector<float>(1, static_cast<float>(kGradScale)), {1}, ACL_FLOAT);
  CHECK_RET(gradScale, return 1);
  aclTensorList* paramsRef = aclCreateTensorList(lists[0].data(), 2);
  aclTensorList* expAvgs = aclCreateTensorList(lists[1].data(), 2);
  aclTensorList* expAvgSqs = aclCreateTensorList(lists[2].data(), 2);
  aclTensorList* maxExpAvgSqs = aclCreateTensorList(lists[3].data(), 2);
  aclTensorList* grads = aclCreateTensorList(lists[4].data(), 2);
  aclTensorList* stateSteps = aclCreateTensorList(lists[5].data(), 2);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnFusedAdamwGetWorkspaceSize(paramsRef, grads, expAvgs, expAvgSqs, maxExpAvgSqs,
                                                          stateSteps, gradScale, nullptr, kLr, kBeta1, kBeta2,
                                                          kWeightDecay, kEps, true, false, &workspaceSize, &executor);
  int failures = LaunchAndWait("aclnnFusedAdamw", ret, workspaceSize, executor, aclnnFusedAdamw, stream);
  if (failures == 0)
    for (int i = 0; i < 2; ++i) failures += CheckParam(tensors, t[i], params[i]);
  aclDestroyTensorList(paramsRef);
  aclDestroyTensorList(grads);
  aclDestroyTensorList(expAvgs);
  aclDestroyTensorList(expAvgSqs);
  aclDestroyTensorList(maxExpAvgSqs);
  aclDestroyTensorList(stateSteps);
  return failures;
}

}  // namespace

int main() { return RunSample("aclnnFusedAdamw", FusedAdamwSample); }
