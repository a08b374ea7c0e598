/* aclnn base: status codes, tensors, executors (vendor names and values). */
#ifndef TILEGRAD_ACLNN_ACLNN_BASE_H_
#define TILEGRAD_ACLNN_ACLNN_BASE_H_

#include "acl/acl_base.h"

#define ACLNN_API ACL_FUNC_VISIBILITY

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus;

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002

typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;

/* A view (viewDims, stride in elements, offset in elements) over storage (storageDims) at tensorData.
 * Returns NULL (with aclGetRecentErrMsg set) when a dims pointer is NULL with a non-zero count, a
 * dimension is negative, or the dtype is unknown. The view is checked against the storage when an
 * operator uses it. */
ACLNN_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                     const int64_t* stride, int64_t offset, aclFormat format,
                                     const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData);
ACLNN_API aclnnStatus aclDestroyTensor(const aclTensor* tensor);
ACLNN_API aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum);
ACLNN_API aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue, uint64_t* stridesNum);
ACLNN_API aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset);
ACLNN_API aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims, uint64_t* storageDimsNum);
ACLNN_API aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format);
ACLNN_API aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType);
/* Destroys an executor that will not be launched (phase 2 releases it otherwise). */
ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNN_ACLNN_BASE_H_ */
