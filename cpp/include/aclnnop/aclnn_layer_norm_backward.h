/* aclnnLayerNormBackward: gradInputOut = rstd * (dy*w - mean_N(dy*w) - xhat * mean_N(dy*w*xhat)),
   gradWeightOut = sum over rows of dy * xhat, gradBiasOut = sum over rows of dy (xhat = (x - mean) * rstd),
   each computed when its outputMask entry is true. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_
#define TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* mean,
    const aclTensor* rstd, const aclTensor* weightOptional, const aclTensor* biasOptional,
    const aclBoolArray* outputMask, aclTensor* gradInputOut, aclTensor* gradWeightOut, aclTensor* gradBiasOut,
    uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnLayerNormBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_BACKWARD_H_ */
