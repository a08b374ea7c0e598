/* The docs' CANN quick start: a program written for CANN, unchanged, running on the CPU (the part
 * between the snippet markers is shown verbatim in the README and the docs; tests/test_docs.py checks
 * the README's block). C++11, as the vendor's samples. Checked against the float64 formula. */
#include <cmath>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_silu_backward.h"

int main() {
  std::vector<float> host_x = {-2, -1, 0, 1, 2, 3}, host_dx(6);
  const size_t bytes = host_x.size() * sizeof(float);
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream stream = nullptr;
  aclrtCreateStream(&stream);
  void *dy = nullptr, *x = nullptr, *dx = nullptr;
  aclrtMalloc(&dy, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMalloc(&x, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMalloc(&dx, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  std::vector<float> ones(6, 1.f);
  aclrtMemcpy(dy, bytes, ones.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
  aclrtMemcpy(x, bytes, host_x.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
  const int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
  aclTensor* t_dy = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, dy);
  aclTensor* t_x = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, x);
  aclTensor* t_dx = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, dx);

  // --8<-- [start:launch]
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  aclnnStatus status = aclnnSiluBackwardGetWorkspaceSize(t_dy, t_x, t_dx, &workspace_size, &executor);
  void* workspace = nullptr;
  if (status == ACL_SUCCESS && workspace_size > 0)
    aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST);
  if (status == ACL_SUCCESS) status = aclnnSiluBackward(workspace, workspace_size, executor, stream);
  aclrtSynchronizeStream(stream);
  if (status != ACL_SUCCESS) std::printf("aclnn error %d: %s\n", status, aclGetRecentErrMsg());
  // --8<-- [end:launch]

  aclrtMemcpy(host_dx.data(), bytes, dx, bytes, ACL_MEMCPY_DEVICE_TO_HOST);
  int failures = status == ACL_SUCCESS ? 0 : 1;
  for (size_t i = 0; i < host_x.size() && failures == 0; ++i) {
    const double v = host_x[i], s = 1.0 / (1.0 + std::exp(-v)), want = s * (1.0 + v * (1.0 - s));
    if (std::fabs(host_dx[i] - want) > 1e-6 * std::fabs(want) + 1e-30) {
      std::printf("docs cann quickstart: dx[%zu] = %.9g, want %.9g\n", i, host_dx[i], want);
      failures = 1;
    }
  }
  aclDestroyTensor(t_dy);
  aclDestroyTensor(t_x);
  aclDestroyTensor(t_dx);
  if (workspace != nullptr) aclrtFree(workspace);
  aclrtFree(dy);
  aclrtFree(x);
  aclrtFree(dx);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return failures;
}
