/* aclnnRotaryPositionEmbeddingGrad: the gradient of aclnnRotaryPositionEmbedding. dxOut from dy, cos
   and sin; with xOptional also dcosOut = sum(dy * x) and dsinOut = sum(dy * rotate(x)) over the dims
   where cos / sin were broadcast (left untouched when xOptional is null). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_GRAD_H_
#define TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* cos, const aclTensor* sin, const aclTensor* xOptional, int64_t mode,
    const aclTensor* dxOut, const aclTensor* dcosOut, const aclTensor* dsinOut, uint64_t* workspaceSize,
    aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnRotaryPositionEmbeddingGrad(void* workspace, uint64_t workspaceSize,
                                                       aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_GRAD_H_ */
