/* aclnnCrossEntropyLossGrad: gradient of aclnnCrossEntropyLoss w.r.t. its input, from logProb
 * (weights, ignoreIndex for any sign, label smoothing and z-loss; specification section 3). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_GRAD_H_
#define TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor.
 * reductionOptional: "none" | "mean" | "sum" (null: "mean"). */
ACLNN_API aclnnStatus aclnnCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* gradLoss, const aclTensor* logProb, const aclTensor* target, const aclTensor* weightOptional,
    const aclTensor* gradZlossOptional, const aclTensor* lseForZlossOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, const aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. A target out of range: 161002. */
ACLNN_API aclnnStatus aclnnCrossEntropyLossGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_CROSS_ENTROPY_LOSS_GRAD_H_ */
