// The aclnn host-side argument objects (aclScalar, aclIntArray, aclFloatArray, aclBoolArray,
// aclTensorList, aclScalarList): value copies made at creation, for operators that take them.
#pragma once

#include <cstdint>
#include <vector>

#include "aclnn/aclnn_base.h"

struct aclScalar {
  int32_t dtype = ACL_DT_UNDEFINED;  // a plain integer: any value the caller passed (see aclTensor)
  alignas(16) unsigned char bytes[16] = {};  // the value, dtype_size(dtype) bytes of it
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclFloatArray {
  std::vector<float> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

// Owns its tensors: aclDestroyTensorList destroys them (as the vendor's).
struct aclTensorList {
  std::vector<const aclTensor*> tensors;
};

struct aclScalarList {
  std::vector<const aclScalar*> scalars;
};
