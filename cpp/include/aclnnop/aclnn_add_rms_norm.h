/* aclnnAddRmsNorm: xOut = x1 + x2 (x1's dtype), rstd = 1 / sqrt(mean(xOut^2 over gamma's dims) + epsilon),
   yOut = (xOut * rstd) * gamma. The vendor has no backward; tilegrad's is add_rms_norm_backward (C++ / Python). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_ADD_RMS_NORM_H_
#define TILEGRAD_ACLNNOP_ACLNN_ADD_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma,
                                                      double epsilon, const aclTensor* yOut, const aclTensor* rstdOut,
                                                      const aclTensor* xOut, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnAddRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_ADD_RMS_NORM_H_ */
