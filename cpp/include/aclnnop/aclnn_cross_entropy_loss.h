/* aclnnCrossEntropyLoss: log-softmax, (weighted, label-smoothed, z-loss) cross entropy and the
 * log-sum-exp per row (specification section 3). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_H_
#define TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_H_

#include "aclnn/aclnn_base.h"

#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor.
 * reductionOptional: "none" | "mean" | "sum" (null: "mean"). zlossOut and lseForZlossOut may be null
 * unless returnZloss. */
ACLNN_API aclnnStatus aclnnCrossEntropyLossGetWorkspaceSize(
    const aclTensor* input, const aclTensor* target, const aclTensor* weightOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, bool returnZloss,
    const aclTensor* lossOut, const aclTensor* logProbOut, const aclTensor* zlossOut,
    const aclTensor* lseForZlossOut, uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. A target out of range: 161002. */
ACLNN_API aclnnStatus aclnnCrossEntropyLoss(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_H_ */
