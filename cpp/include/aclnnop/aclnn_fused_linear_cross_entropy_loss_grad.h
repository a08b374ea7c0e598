/* aclnnFusedLinearCrossEntropyLossGrad: gradients of the vocabulary-parallel fused linear cross entropy,
 * inputGradOut = G @ weight and weightGradOut = G^T @ input with G the (softmax - one-hot) * grad block,
 * from a given softmax (high-performance mode) or recomputed chunk by chunk (memory-saving mode). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_CROSS_ENTROPY_LOSS_GRAD_H_
#define TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_CROSS_ENTROPY_LOSS_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight, const aclTensor* targetMask,
    const aclTensor* maskedTarget, float labelSmoothing, const aclTensor* logitsMaxOptional,
    const aclTensor* sumExpLogitsOptional, const aclTensor* softmaxOptional, aclTensor* inputGradOut,
    aclTensor* weightGradOut, uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnFusedLinearCrossEntropyLossGrad(void* workspace, uint64_t workspaceSize,
                                                           aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_FUSED_LINEAR_CROSS_ENTROPY_LOSS_GRAD_H_ */
