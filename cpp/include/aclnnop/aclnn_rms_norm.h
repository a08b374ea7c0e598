/* aclnnRmsNorm: rstd = 1 / sqrt(mean(x^2 over gamma's dims) + epsilon), yOut = (x * rstd) * gamma. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_H_
#define TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                   const aclTensor* yOut, const aclTensor* rstdOut,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_RMS_NORM_H_ */
