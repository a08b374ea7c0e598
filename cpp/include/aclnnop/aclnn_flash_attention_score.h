/* aclnnFlashAttentionScore: attentionOut = softmax(mask(scaleValue * query key^T)) value, with the
 * row statistics softmaxMaxOut / softmaxSumOut (fp32 [B, N1, Sq, 8]) the grad reads back. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_H_
#define TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor.
 * realShiftOptional and dropMaskOptional (with keepProb < 1) are not supported: 161002.
 * paddingMaskOptional and softmaxOutOut are reserved and never read or written. */
ACLNN_API aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor* softmaxMaxOut,
    const aclTensor* softmaxSumOut, const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFlashAttentionScore(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                               const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FLASH_ATTENTION_SCORE_H_ */
