/* aclnnGeGluV3 / aclnnGeGlu: self split along dim into halves A | B; activateLeft: out = gelu(A) * B, else
   out = A * gelu(B); outGelu = the gelu of the activated half. approximate 0 = erf, 1 = tanh. aclnnGeGlu is
   aclnnGeGluV3 with activateLeft = false. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_GEGLU_H_
#define TILEGRAD_ACLNNOP_ACLNN_GEGLU_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnGeGluGetWorkspaceSize(const aclTensor* self, int64_t dim, int64_t approximate,
                                                aclTensor* out, aclTensor* outGelu, uint64_t* workspaceSize,
                                                aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnGeGlu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

ACLNN_API aclnnStatus aclnnGeGluV3GetWorkspaceSize(const aclTensor* self, int64_t dim, int64_t approximate,
                                                  bool activateLeft, aclTensor* out, aclTensor* outGelu,
                                                  uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnGeGluV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                  aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_GEGLU_H_ */
