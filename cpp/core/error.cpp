#include "core/error.h"

#include "acl/acl_base.h"

namespace tilegrad::core {

namespace {
thread_local std::string g_last_error;
// What aclGetRecentErrMsg returned last on this thread (kept so the pointer stays valid after clearing).
thread_local std::string g_reported_error;
}

void set_last_error(const std::string& message) { g_last_error = message; }
const char* last_error() { return g_last_error.c_str(); }

const char* take_last_error() {
  g_reported_error.swap(g_last_error);
  g_last_error.clear();
  return g_reported_error.c_str();
}

}  // namespace tilegrad::core

// As the vendor's: reading the message consumes it, so a later read without a new error returns "".
extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) { return tilegrad::core::take_last_error(); }
