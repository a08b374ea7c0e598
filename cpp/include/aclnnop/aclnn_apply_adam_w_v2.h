/* aclnnApplyAdamWV2: AdamW on one tensor, in place (varRef, mRef, vRef and, with amsgrad, the running
   maximum maxGradNormOptionalRef). The update uses t = step + 1 (the vendor's convention: pass the
   steps taken before this one). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_APPLY_ADAM_W_V2_H_
#define TILEGRAD_ACLNNOP_ACLNN_APPLY_ADAM_W_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor* varRef, aclTensor* mRef, aclTensor* vRef,
                                                        aclTensor* maxGradNormOptionalRef, const aclTensor* grad,
                                                        const aclTensor* step, float lr, float beta1, float beta2,
                                                        float weightDecay, float eps, bool amsgrad, bool maximize,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnApplyAdamWV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_APPLY_ADAM_W_V2_H_ */
