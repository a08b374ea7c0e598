/* aclnn base: status codes, tensors, executors (vendor names and values). */
#ifndef TILEGRAD_ACLNN_ACLNN_BASE_H_
#define TILEGRAD_ACLNN_ACLNN_BASE_H_

#include "acl/acl_base.h"

#ifndef __cplusplus
#include <stdbool.h>
#endif

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
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;
typedef struct aclOpExecutor aclOpExecutor;

/* Nothing to set up on the CPU; accepted for programs that call them. */
ACLNN_API aclnnStatus aclnnInit(const char* configPath);
ACLNN_API aclnnStatus aclnnFinalize(void);

/* A view (viewDims, stride in elements, offset in elements) over storage (storageDims) at tensorData.
 * stride NULL means contiguous row-major strides over viewDims (as the vendor's samples use it; a
 * dimension of 0 counts as 1); aclGetViewStrides returns them. Returns NULL (with aclGetRecentErrMsg
 * set) when a dims pointer is NULL with a non-zero count, a dimension is negative, or the dtype is unknown. The view is checked against the storage when an
 * operator uses it. tensorData may be NULL at aclnnXxxGetWorkspaceSize (as in the vendor's samples);
 * the launch refuses it (161001) until aclSetInputTensorAddr / aclSetOutputTensorAddr gave an address. */
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
/* The tensor's data pointer (tensorData of aclCreateTensor), read or replaced. */
ACLNN_API aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr);
ACLNN_API aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr);

/* Host-side argument objects; each create copies the values (NULL on bad arguments, with
 * aclGetRecentErrMsg set). aclCreateTensorList / aclCreateScalarList take ownership of the elements:
 * destroying the list destroys them. */
ACLNN_API aclScalar* aclCreateScalar(void* value, aclDataType dataType);
ACLNN_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
ACLNN_API aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size);
ACLNN_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size);
ACLNN_API aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size);
ACLNN_API aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size);
ACLNN_API aclnnStatus aclDestroyScalar(const aclScalar* scalar);
ACLNN_API aclnnStatus aclDestroyIntArray(const aclIntArray* array);
ACLNN_API aclnnStatus aclDestroyFloatArray(const aclFloatArray* array);
ACLNN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray* array);
ACLNN_API aclnnStatus aclDestroyTensorList(const aclTensorList* array);
ACLNN_API aclnnStatus aclDestroyScalarList(const aclScalarList* array);
ACLNN_API aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size);
ACLNN_API aclnnStatus aclGetFloatArraySize(const aclFloatArray* array, uint64_t* size);
ACLNN_API aclnnStatus aclGetBoolArraySize(const aclBoolArray* array, uint64_t* size);
ACLNN_API aclnnStatus aclGetTensorListSize(const aclTensorList* tensorList, uint64_t* size);
ACLNN_API aclnnStatus aclGetScalarListSize(const aclScalarList* scalarList, uint64_t* size);

/* Executors. Without aclSetAclOpExecutorRepeatable an executor is single-use: the second-phase call
 * (aclnnXxx) runs it and releases it, and a second launch returns 161002. Made repeatable right after
 * aclnnXxxGetWorkspaceSize, it launches any number of times until aclDestroyAclOpExecutor.
 * aclDestroyAclOpExecutor(NULL) returns 161001; an executor that is not live returns 161002. */
ACLNN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor);
ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor);
/* New data pointers for a repeatable executor's next launches: index counts the operator's input
 * (resp. output) tensors in the order of its GetWorkspaceSize parameters, optional ones included;
 * aclSetTensorAddr counts all of them, inputs first. tensor must be the one passed there at that
 * position (its data pointer is updated too). 161002 for an index out of range, a slot that was NULL at
 * GetWorkspaceSize, a tensor-list slot, or a different tensor. The Dynamic forms refresh element
 * relativeIndex of the tensor-list parameter irIndex (counted the same way); 161002 when irIndex is not a
 * tensor list (for an operator without one: "has no tensor-list parameter") or relativeIndex is past the
 * list. A NULL executor or tensor: 161001, except aclSetTensorAddr / aclSetDynamicTensorAddr: 561103
 * (as the vendor documents them). */
ACLNN_API aclnnStatus aclSetInputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                            void* addr);
ACLNN_API aclnnStatus aclSetOutputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                             void* addr);
ACLNN_API aclnnStatus aclSetTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor, void* addr);
ACLNN_API aclnnStatus aclSetDynamicTensorAddr(aclOpExecutor* executor, size_t irIndex, const size_t relativeIndex,
                                              aclTensorList* tensors, void* addr);
ACLNN_API aclnnStatus aclSetDynamicInputTensorAddr(aclOpExecutor* executor, size_t irIndex,
                                                   const size_t relativeIndex, aclTensorList* tensors, void* addr);
ACLNN_API aclnnStatus aclSetDynamicOutputTensorAddr(aclOpExecutor* executor, size_t irIndex,
                                                    const size_t relativeIndex, aclTensorList* tensors, void* addr);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNN_ACLNN_BASE_H_ */
