#include "core/error.h"

#include "acl/acl_base.h"

namespace tilegrad::core {

namespace {
thread_local std::string g_last_error;
}

void set_last_error(const std::string& message) { g_last_error = message; }
const char* last_error() { return g_last_error.c_str(); }

}  // namespace tilegrad::core

extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) { return tilegrad::core::last_error(); }
