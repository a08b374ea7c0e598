/* aclnnGeGluV3Backward / aclnnGeGluBackward: gradInput (self's shape) = the halves dh = gradOutput * l * gelu'(h) for
   the activated half h and dl = gradOutput * gelu for the linear half l, gelu = the forward's outGelu.
   aclnnGeGluBackward is aclnnGeGluV3Backward with activateLeft = false. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_GEGLU_BACKWARD_H_
#define TILEGRAD_ACLNNOP_ACLNN_GEGLU_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnGeGluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                        const aclTensor* gelu, int64_t dim, int64_t approximate,
                                                        aclTensor* gradInput, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnGeGluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream);

ACLNN_API aclnnStatus aclnnGeGluV3BackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                          const aclTensor* gelu, int64_t dim, int64_t approximate,
                                                          bool activateLeft, aclTensor* gradInput,
                                                          uint64_t* workspaceSize, aclOpExecutor** executor);
ACLNN_API aclnnStatus aclnnGeGluV3Backward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                          aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_GEGLU_BACKWARD_H_ */
