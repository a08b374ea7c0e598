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

// The view an operator sees. Checks (161002) that the format is a plain one (private packed formats
// such as NC1HWC0 and FRACTAL_NZ are rejected) and that every element of the view lies inside the
// storage, so no operator can read or write outside memory the caller described.
TensorView view_of(const char* op, const char* arg, const aclTensor* t);
// Same for an optional tensor: an empty TensorView (data == nullptr, dtype undefined) when null.
TensorView optional_view_of(const char* op, const char* arg, const aclTensor* t);
// The views of a tensor-list parameter `arg` (161001 for a NULL list or element): element i is checked
// and recorded as "<arg>[i]", so a repeatable executor can refresh its address (aclSetDynamic*TensorAddr;
// name the parameter "<arg>[]" in the executor's TensorParams).
std::vector<TensorView> list_views_of(const char* op, const char* arg, const aclTensorList* list);

}  // namespace tilegrad::core
