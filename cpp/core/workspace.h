// Workspaces and buffers: overflow-checked sizes, 64-byte (cache line) alignment and the layout of
// one workspace as aligned regions. Every operator's workspace size is computed through these: a size
// that does not fit int64 is a 161002 naming the operator and the quantity, never a wrapped (too
// small) workspace that a launch would then write past.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace tilegrad::core {

// The alignment of every workspace region and every buffer tilegrad allocates: a cache line, and
// enough for any SIMD load or store.
constexpr int64_t kWorkspaceAlign = 64;

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

// bytes rounded up to a multiple of kWorkspaceAlign, checked.
inline int64_t align64(const char* op, const char* what, int64_t bytes) {
  return checked_add(op, what, bytes, kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// count * elem_bytes rounded up to kWorkspaceAlign, checked: the size of an aligned region (also the
// stride of equal regions side by side, e.g. one scratch row per tile).
inline int64_t aligned_bytes(const char* op, const char* what, int64_t count, int64_t elem_bytes) {
  return align64(op, what, checked_mul(op, what, count, elem_bytes));
}

// Consecutive regions of one workspace, each starting on a kWorkspaceAlign boundary and padded to
// one, every size, offset and the total checked:
//
//   WorkspaceLayout ws(kOp);
//   t.gamma_offset = ws.take("workspace gamma", cols, 4);
//   t.rows_offset = ws.take("workspace rows", tiles, row_bytes);
//   t.workspace_bytes = ws.bytes();
class WorkspaceLayout {
 public:
  explicit WorkspaceLayout(const char* op) : op_(op) {}
  // Reserves count * elem_bytes bytes named `what`; returns the region's offset.
  int64_t take(const char* what, int64_t count, int64_t elem_bytes) {
    const int64_t at = bytes_;
    bytes_ = checked_add(op_, "workspace size", bytes_, aligned_bytes(op_, what, count, elem_bytes));
    return at;
  }
  // The bytes of the regions taken so far (a multiple of kWorkspaceAlign).
  int64_t bytes() const { return bytes_; }

 private:
  const char* op_;
  int64_t bytes_ = 0;
};

// std::aligned_alloc of `bytes` rounded up to kWorkspaceAlign (which aligned_alloc requires); nullptr
// when that fails or the rounded size does not fit. Free with std::free.
inline void* alloc_aligned(uint64_t bytes) {
  constexpr uint64_t kAlign = kWorkspaceAlign;
  if (bytes > UINT64_MAX - (kAlign - 1)) return nullptr;
  return std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

}  // namespace tilegrad::core
