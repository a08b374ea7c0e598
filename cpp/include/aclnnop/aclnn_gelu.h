/* aclnnGelu: out = gelu(self), the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_GELU_H_
#define TILEGRAD_ACLNNOP_ACLNN_GELU_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspaceSize,
                                               aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnGelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_GELU_H_ */
