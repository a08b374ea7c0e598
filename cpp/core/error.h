// Errors: every failure is a tilegrad::Error thrown with a one-line message naming the operator,
// the argument, the rule and the offending value. The C ABI turns it into a status code plus the
// thread-local message read by aclGetRecentErrMsg(); the Python module into an exception.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "tilegrad/status.hpp"

namespace tilegrad::core {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

template <class... Parts>
[[noreturn]] void fail(Status status, const Parts&... parts) {
  throw Error(status, concat(parts...));
}

template <class... Parts>
[[noreturn]] void fail_index(const Parts&... parts) {
  throw Error(Status::kParamInvalid, concat(parts...), ErrorKind::kIndex);
}

template <class... Parts>
void check(bool ok, const Parts&... parts) {
  if (!ok) fail(Status::kParamInvalid, parts...);
}

// The calling thread's most recent C ABI error ("" if none).
void set_last_error(const std::string& message);
const char* last_error();
// Returns the message and clears it (aclGetRecentErrMsg); valid until the thread's next call.
const char* take_last_error();

// Runs fn, converting any exception into a status code + last error message (for the C ABI).
template <class Fn>
int32_t guard(const char* op, Fn&& fn) noexcept {
  try {
    std::forward<Fn>(fn)();
    return 0;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error(concat(op, ": out of memory"));
    return static_cast<int32_t>(Status::kInner);
  } catch (const std::exception& e) {
    set_last_error(concat(op, ": internal error: ", e.what()));
    return static_cast<int32_t>(Status::kInner);
  } catch (...) {
    set_last_error(concat(op, ": internal error"));
    return static_cast<int32_t>(Status::kInner);
  }
}

}  // namespace tilegrad::core
