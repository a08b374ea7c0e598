/* aclnnEmbeddingDenseBackward: out[r,:] = sum of the grad rows whose index is r (r != paddingIdx),
 * divided by count(r) when scaleGradByFreq; rows never hit are zero. */
#ifndef TILEGRAD_ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_
#define TILEGRAD_ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size (the sort buffers) and a
 * single-use executor. paddingIdx is a two's-complement int64; outside [0, numWeights) = none. */
ACLNN_API aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(const aclTensor* grad, const aclTensor* indices,
                                                                  uint64_t numWeights, uint64_t paddingIdx,
                                                                  bool scaleGradByFreq, const aclTensor* out,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. An index < 0 or >= numWeights: 161002. */
ACLNN_API aclnnStatus aclnnEmbeddingDenseBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_EMBEDDING_DENSE_BACKWARD_H_ */
