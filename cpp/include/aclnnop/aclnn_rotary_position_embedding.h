/* aclnnRotaryPositionEmbedding: out = x * cos + rotate(x) * sin over the last dim, rotate by mode:
   0 half (cat(-x2, x1)), 1 interleave (pairs (2i, 2i+1)), 2 quarter, 3 interleave-half. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_H_
#define TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size (always 0) and a single-use executor. */
ACLNN_API aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor* x, const aclTensor* cos,
                                                                   const aclTensor* sin, int64_t mode, aclTensor* out,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnRotaryPositionEmbedding(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                   aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_ROTARY_POSITION_EMBEDDING_H_ */
