/* aclnnFusedCrossEntropyLossWithMaxSum: loss = log(sumExpLogits) - predictedLogits from the all-reduced
 * statistics of aclnnFusedLinearOnlineMaxSum; optionally softmax = exp(logits - logitsMax) / sumExpLogits. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FUSED_CROSS_ENTROPY_LOSS_WITH_MAX_SUM_H_
#define TILEGRAD_ACLNNOP_ACLNN_FUSED_CROSS_ENTROPY_LOSS_WITH_MAX_SUM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize(
    const aclTensor* logitsMax, const aclTensor* sumExpLogits, const aclTensor* predictedLogits, float labelSmoothing,
    const aclTensor* inputOptional, const aclTensor* weightOptional, const aclTensor* vocabParallelLogitsOptional,
    aclTensor* lossOut, aclTensor* softMaxOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFusedCrossEntropyLossWithMaxSum(void* workspace, uint64_t workspaceSize,
                                                           aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FUSED_CROSS_ENTROPY_LOSS_WITH_MAX_SUM_H_ */
