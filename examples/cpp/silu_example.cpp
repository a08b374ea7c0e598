// SiLU backward through tilegrad's two C++ entry points: the native API (TensorView, exceptions)
// and the aclnn two-phase C ABI a CANN program uses.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "tilegrad/tilegrad.hpp"

int main() {
  std::vector<float> dy(6, 1.0f), x = {1, 2, 3, 4, 5, 6}, dx(6);

  // Native C++ API: views over caller memory; errors are tilegrad::Error with the aclnn status.
  tilegrad::silu_backward({dy.data(), tilegrad::DType::kFloat32, {2, 3}},
                          {x.data(), tilegrad::DType::kFloat32, {2, 3}},
                          {dx.data(), tilegrad::DType::kFloat32, {2, 3}});
  std::printf("native: dx[0] = %f\n", dx[0]);
  try {
    tilegrad::silu_backward({dy.data(), tilegrad::DType::kFloat32, {2, 3}},
                            {x.data(), tilegrad::DType::kFloat32, {3, 2}},
                            {dx.data(), tilegrad::DType::kFloat32, {2, 3}});
  } catch (const tilegrad::Error& e) {
    std::printf("native error %d: %s\n", e.code(), e.what());
  }

  // aclnn C ABI: GetWorkspaceSize, then launch (synchronous on the CPU).
  const int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
  aclTensor* t_dy = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, dy.data());
  aclTensor* t_x = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, x.data());
  aclTensor* t_dx = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, dx.data());
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  aclnnStatus status = aclnnSiluBackwardGetWorkspaceSize(t_dy, t_x, t_dx, &workspace_size, &executor);
  if (status == ACLNN_SUCCESS) status = aclnnSiluBackward(nullptr, workspace_size, executor, nullptr);
  std::printf("aclnn: status %d, dx[5] = %f %s\n", status, dx[5], aclGetRecentErrMsg());
  aclDestroyTensor(t_dy);
  aclDestroyTensor(t_x);
  aclDestroyTensor(t_dx);
  return status == ACLNN_SUCCESS ? 0 : 1;
}
