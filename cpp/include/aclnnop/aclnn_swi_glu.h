/* aclnnSwiGlu: out = silu(a) * b, (a, b) = the halves of x along dim (default -1). */
#ifndef TILEGRAD_ACLNNOP_ACLNN_SWI_GLU_H_
#define TILEGRAD_ACLNNOP_ACLNN_SWI_GLU_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase 1: validates, computes the tiling, returns the workspace size and a single-use executor. */
ACLNN_API aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor* x, int64_t dim, const aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor);
/* Phase 2: runs (synchronously) and releases the executor. */
ACLNN_API aclnnStatus aclnnSwiGlu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                 aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACLNNOP_ACLNN_SWI_GLU_H_ */
