/* aclnnBinaryCrossEntropyWithLogits: binary cross entropy with logits (the forward loss).
 * Per element, weightOptional and posWeightOptional broadcast to self's shape:
 *   l = -weight * (posWeight * target * log(sigmoid(self)) + (1 - target) * log(1 - sigmoid(self)))
 * (missing weight / posWeight: ones); out = l for reduction 0 (none, out has self's shape), the mean
 * over numel(self) for 1, the sum for 2 (out has one element: shape [] or [1]). target has self's
 * shape; out's dtype is target's. The mean / sum is reduced in a fixed order (deterministic). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_H_
#define TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(const aclTensor* self, const aclTensor* target,
                                                                        const aclTensor* weightOptional,
                                                                        const aclTensor* posWeightOptional,
                                                                        int64_t reduction, aclTensor* out,
                                                                        uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnBinaryCrossEntropyWithLogits(void* workspace, uint64_t workspaceSize,
                                                        aclOpExecutor* executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_H_ */
