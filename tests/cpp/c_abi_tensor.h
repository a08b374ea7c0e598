/* contiguous(): the row-major aclTensor the C test programs build their cases from. */
#ifndef TILEGRAD_TESTS_C_ABI_TENSOR_H_
#define TILEGRAD_TESTS_C_ABI_TENSOR_H_

#include <stdint.h>

#include "aclnn/aclnn_base.h"

/* A contiguous tensor of `rank` dims (up to 16: invalid ranks are test cases too) over `data`, its
 * storage exactly the view. */
static aclTensor* contiguous(const int64_t* shape, uint64_t rank, aclDataType dt, void* data) {
  int64_t strides[16], numel = 1;
  for (int i = (int)rank - 1; i >= 0; --i) {
    strides[i] = numel;
    numel *= shape[i];
  }
  return aclCreateTensor(shape, rank, dt, strides, 0, ACL_FORMAT_ND, &numel, 1, data);
}

#endif /* TILEGRAD_TESTS_C_ABI_TENSOR_H_ */
