/* aclnnRmsNormGrad: dxOut = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd, xhat = x * rstd;
   dgammaOut = sum over rows of dy * xhat (float32, deterministic). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_GRAD_H_
#define TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x, const aclTensor* rstd,
                                                       const aclTensor* gamma, const aclTensor* dxOut,
                                                       const aclTensor* dgammaOut, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnRmsNormGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_GRAD_H_ */
