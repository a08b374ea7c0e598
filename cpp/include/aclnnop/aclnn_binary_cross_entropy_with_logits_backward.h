/* aclnnBinaryCrossEntropyWithLogitsBackward: gradient of binary cross entropy with logits.
 * s = sigmoid(self); with posWeight: pt = posWeight * target, g = (pt + 1 - target) * s - pt;
 * without: g = s - target; out = g * gradOutput * weight * scale, scale = 1 / max(1, numel(self))
 * for reduction 1 (mean), 1 for 0 (none) and 2 (sum). gradOutput, weightOptional and
 * posWeightOptional broadcast to self's shape; target and out have self's shape; out's dtype is
 * target's. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD_H_
#define TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target, const aclTensor* weightOptional,
    const aclTensor* posWeightOptional, int64_t reduction, aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackward(void* workspace, uint64_t workspaceSize,
                                                                aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD_H_ */
