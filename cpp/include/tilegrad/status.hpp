// Status codes (aclnn numbering, specification section 0) and the exception the native C++ API throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tilegrad/export.h"

namespace tilegrad {

enum class Status : int32_t {
  kSuccess = 0,
  kParamNullptr = 161001,      // ACLNN_ERR_PARAM_NULLPTR
  kParamInvalid = 161002,      // ACLNN_ERR_PARAM_INVALID
  kRuntimeError = 361001,      // ACLNN_ERR_RUNTIME_ERROR
  kInner = 561000,             // ACLNN_ERR_INNER
  kInnerTilingError = 561002,  // ACLNN_ERR_INNER_TILING_ERROR
};

// What kind of mistake an error reports; the Python layer maps it to an exception class.
enum class ErrorKind : int {
  kValue = 0,  // bad shape, dtype or attribute value      -> ValueError
  kType = 1,   // wrong kind of object (Python only)        -> TypeError
  kIndex = 2,  // an index or target out of range (at run)  -> IndexError
  kMemory = 3, // allocation failure                        -> MemoryError
};

// Thrown by every native C++ entry point; carries the aclnn status code and the one-line message
// that aclGetRecentErrMsg() would return for the same failure through the C ABI.
class TILEGRAD_API Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message, ErrorKind kind = ErrorKind::kValue)
      : std::runtime_error(message), status_(status), kind_(kind) {}
  Status status() const noexcept { return status_; }
  int32_t code() const noexcept { return static_cast<int32_t>(status_); }
  ErrorKind kind() const noexcept { return kind_; }

 private:
  Status status_;
  ErrorKind kind_;
};

}  // namespace tilegrad
