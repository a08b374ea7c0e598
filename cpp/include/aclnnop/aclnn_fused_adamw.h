/* aclnnFusedAdamw: AdamW over tensor lists, in place (PyTorch's _fused_adamw_ signature). The update
   uses t = stateSteps[i] + 1 (the vendor's convention: pass the steps taken before this one).
   foundInfOptional == 1.0 skips the update; grads are multiplied by 1 / gradScaleOptional. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FUSED_ADAMW_H_
#define TILEGRAD_ACLNNOP_ACLNN_FUSED_ADAMW_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnFusedAdamwGetWorkspaceSize(const aclTensorList* paramsRef, const aclTensorList* grads,
                                                      const aclTensorList* expAvgsRef,
                                                      const aclTensorList* expAvgSqsRef,
                                                      const aclTensorList* maxExpAvgSqsRef,
                                                      const aclTensorList* stateSteps,
                                                      const aclTensor* gradScaleOptional,
                                                      const aclTensor* foundInfOptional, double lr, double beta1,
                                                      double beta2, double weightDecay, double eps, bool amsgrad,
                                                      bool maximize, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFusedAdamw(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FUSED_ADAMW_H_ */
