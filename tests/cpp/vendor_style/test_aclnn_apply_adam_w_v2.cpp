/* CANN sample for aclnnApplyAdamWV2 (C++11, vendor headers only): the document's own data (var, m, v,
 * grad and maxGradNorm all {0, 1, 2, 3} in (2, 2), step {1}, amsgrad and maximize on, lr 1e-3, betas
 * 0.9 / 0.999, weightDecay 1e-2, eps 1e-8). Checks var, m, v and maxGradNorm against float64 AdamW
 * computed here with the vendor's step convention t = step + 1. */
#include <cmath>
#include <vector>

#include "aclnn_apply_adam_w_v2.h"
#include "sample_common.h"

namespace {

struct Reference {
  std::vector<double> var, m, v, vmax;
};

Reference AdamWReference(const std::vector<double>& var, const std::vector<double>& m, const std::vector<double>& v,
                         const std::vector<double>& vmax, const std::vector<double>& grad, double step, double lr,
                         double beta1, double beta2, double wd, double eps) {
  Reference r = {var, m, v, vmax};
  const double t = step + 1;
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = -grad[i];  // maximize
    r.m[i] = beta1 * m[i] + (1 - beta1) * g;
    r.v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    r.vmax[i] = std::fmax(vmax[i], r.v[i]);
    const double denom = std::sqrt(r.vmax[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps;
    r.var[i] = var[i] * (1 - lr * wd) - lr / (1 - std::pow(beta1, t)) * r.m[i] / denom;
  }
  return r;
}

int ApplyAdamWV2Sample(aclrtStream stream) {
  const std::vector<float> host = {0, 1, 2, 3};
  const std::vector<float> stepHost = {1};
  const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, weightDecay = 1e-2f, eps = 1e-8f;
  SampleTensors tensors;
  aclTensor* var = tensors.Create(host, {2, 2}, ACL_FLOAT);
  aclTensor* m = tensors.Create(host, {2, 2}, ACL_FLOAT);
  aclTensor* v = tensors.Create(host, {2, 2}, ACL_FLOAT);
  aclTensor* grad = tensors.Create(host, {2, 2}, ACL_FLOAT);
  aclTensor* maxgrad = tensors.Create(host, {2, 2}, ACL_FLOAT);
  aclTensor* step = tensors.Create(stepHost, {1}, ACL_FLOAT);
  CHECK_RET(var && m && v && grad && maxgrad && step, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = aclnnApplyAdamWV2GetWorkspaceSize(var, m, v, maxgrad, grad, step, lr, beta1, beta2,
                                                            weightDecay, eps, true, true, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnApplyAdamWV2", ret, workspaceSize, executor, aclnnApplyAdamWV2, stream) == 0,
            return 1);

  const std::vector<double> h = AsDouble(host);
  const Reference want = AdamWReference(h, h, h, h, h, 1, lr, beta1, beta2, weightDecay, eps);
  std::vector<float> got;
  int failures = 0;
  CHECK_RET(tensors.Read(var, &got) == 0, return 1);
  failures += CheckClose("var", got, want.var, 1e-6, 1e-7);
  CHECK_RET(tensors.Read(m, &got) == 0, return 1);
  failures += CheckClose("m", got, want.m, 1e-6, 1e-7);
  CHECK_RET(tensors.Read(v, &got) == 0, return 1);
  failures += CheckClose("v", got, want.v, 1e-6, 1e-7);
  CHECK_RET(tensors.Read(maxgrad, &got) == 0, return 1);
  failures += CheckClose("maxGradNorm", got, want.vmax, 1e-6, 1e-7);
  return failures;
}

}  // namespace

int main() { return RunSample("aclnnApplyAdamWV2", ApplyAdamWV2Sample); }
