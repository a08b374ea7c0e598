/* aclnnGemmaRmsNorm: rstd = 1 / sqrt(mean(x^2 over gamma's dims) + epsilon), yOut = (x * rstd) * (1 + gamma)
   (Gemma's RMSNorm; the 1 is added to gamma in fp32). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_GEMMA_RMS_NORM_H_
#define TILEGRAD_ACLNNOP_ACLNN_GEMMA_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnGemmaRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                        const aclTensor* yOut, const aclTensor* rstdOut,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnGemmaRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_GEMMA_RMS_NORM_H_ */
