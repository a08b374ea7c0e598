// Overflow-checked size arithmetic for workspaces and buffers. Every operator's workspace size is
// computed through these: a size that does not fit int64 is a 161002 naming the operator and the
// quantity, never a wrapped (too small) workspace that a launch would then write past.
#pragma once

#include <cstdint>
#include <new>

#include "core/error.h"
#include "core/executor.h"

namespace tilegrad::core {

// a * b for sizes >= 0; 161002 "<op>: <what> overflows 64-bit sizes (a * b)" when it does not fit.
inline int64_t checked_mul(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    fail(Status::kParamInvalid, op, ": ", what, " overflows 64-bit sizes (", a, " * ", b, ")");
  return r;
}

// a + b for sizes >= 0, same error.
inline int64_t checked_add(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    fail(Status::kParamInvalid, op, ": ", what, " overflows 64-bit sizes (", a, " + ", b, ")");
  return r;
}

// bytes rounded up to a multiple of 64, checked.
inline int64_t checked_align64(const char* op, const char* what, int64_t bytes) {
  return checked_add(op, what, bytes, 63) / 64 * 64;
}

// Consecutive 64-byte-aligned regions of one workspace, every offset and the total checked.
class WorkspaceLayout {
 public:
  explicit WorkspaceLayout(const char* op) : op_(op) {}
  // Reserves count * elem_bytes bytes named `what`; returns the region's offset.
  int64_t take(const char* what, int64_t count, int64_t elem_bytes) {
    const int64_t at = bytes_;
    bytes_ = checked_add(op_, "workspace size", bytes_, checked_align64(op_, what, checked_mul(op_, what, count, elem_bytes)));
    return at;
  }
  int64_t bytes() const { return bytes_; }

 private:
  const char* op_;
  int64_t bytes_ = 0;
};

// run_now for the native APIs: an allocation failure becomes a MemoryError-kind Error (status
// 561000) naming the operator and the workspace size instead of a bare std::bad_alloc.
inline void run_now_named(const char* op, Launch& launch) {
  try {
    run_now(launch);
  } catch (const std::bad_alloc&) {
    throw Error(Status::kInner,
                concat(op, ": out of memory (workspace of ", launch.workspace_bytes(), " bytes could not be allocated)"),
                ErrorKind::kMemory);
  }
}

}  // namespace tilegrad::core
