/* aclnnFlashAttentionScoreGrad: dqOut, dkOut, dvOut of aclnnFlashAttentionScore, recomputing the
 * probabilities from the forward's softmaxMax / softmaxSum (lane 0) and attentionIn (its output). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_GRAD_H_
#define TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor.
 * pseShiftOptional and dropMaskOptional (with keepProb < 1) are not supported: 161002. softmaxMax,
 * softmaxSum and attentionIn are required (161001). paddingMaskOptional, softmaxInOptional and
 * dpseOut are never read or written. */
ACLNN_API aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* keyIn, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut,
    const aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFlashAttentionScoreGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                   const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_GRAD_H_ */
