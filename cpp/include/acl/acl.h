/* aclnn-compatible entry header: runtime (acl_rt.h), base types, init/finalize. */
#ifndef TILEGRAD_ACL_ACL_H_
#define TILEGRAD_ACL_ACL_H_

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACL_ACL_H_ */
