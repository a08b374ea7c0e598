/* aclnnLayerNorm: out = (input - mean) * rstd * weight + bias over the trailing normalizedShape dims;
   meanOut = E[input], rstdOut = 1 / sqrt(Var_biased[input] + eps) (optional outputs). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_H_
#define TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input, const aclIntArray* normalizedShape,
                                                     const aclTensor* weightOptional, const aclTensor* biasOptional,
                                                     double eps, aclTensor* out, aclTensor* meanOutOptional,
                                                     aclTensor* rstdOutOptional, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnLayerNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_LAYER_NORM_H_ */
