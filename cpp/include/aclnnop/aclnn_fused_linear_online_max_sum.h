/* aclnnFusedLinearOnlineMaxSum: per-rank logits max, sum of exp, target logit and target mask of
 * the vocabulary-parallel cross entropy, L = input @ weight^T over the shard [vocabStartIndex, vocabEndIndex). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_ONLINE_MAX_SUM_H_
#define TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_ONLINE_MAX_SUM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* target, int64_t vocabStartIndex,
    int64_t vocabEndIndex, aclTensor* logitsMaxLocalOut, aclTensor* sumExpLogitsLocalOut,
    aclTensor* predictedLogitsLocalOut, aclTensor* targetMaskOut, aclTensor* maskedTargetOut,
    aclTensor* vocabParallelLogitsOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFusedLinearOnlineMaxSum(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                   aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_ONLINE_MAX_SUM_H_ */
