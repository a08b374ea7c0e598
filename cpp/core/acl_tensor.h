// aclTensor (the C ABI's tensor) and its conversion to a TensorView for the operators.
#pragma once

#include <cstdint>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "tilegrad/tensor_view.hpp"

struct aclTensor {
  std::vector<int64_t> view_dims;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements
  // Kept as plain integers: callers may pass any value, and loading an out-of-range value through
  // a C enum type is undefined behaviour in C++ (UBSan: "not a valid value for type").
  int32_t format = ACL_FORMAT_ND;
  int32_t dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> storage_dims;
  void* data = nullptr;
};

namespace tilegrad::core {

// 161001 naming `arg` if t is null.
void require_not_null(const char* op, const char* arg, const void* t);

// The view an operator sees of t, with t's elements at `data` (t->data, or a stand-in while t has
// none: core::ExecutorTensors; an empty view keeps t->data). Checks (161002) that the format is a plain one (private packed formats
// such as NC1HWC0 and FRACTAL_NZ are rejected) and that every element of the view lies inside the
// storage, so no operator can read or write outside memory the caller described.
TensorView view_at(const char* op, const char* arg, const aclTensor* t, void* data);

}  // namespace tilegrad::core
