/* aclnnGeluBackward: gradInput = gradOutput * gelu'(self), the tanh form's derivative (as aclnnGelu). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_GELU_BACKWARD_H_
#define TILEGRAD_ACLNNOP_ACLNN_GELU_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                       const aclTensor* gradInput, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnGeluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_GELU_BACKWARD_H_ */
