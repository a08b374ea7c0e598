// Contiguous stack copies of single rows, for the rows the kernels cannot read in place: a last dim
// with a stride other than 1, or an in-place call whose pair layouts differ between input and
// output (a row's later pairs would read elements its earlier stores replaced). Shared by the
// forward and the grad launches; rows are at most kRopeMaxD elements.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/posembedding/rotary_position_embedding/rope_checks.h"
#include "ops/posembedding/rotary_position_embedding/rope_layout.h"

namespace tilegrad::ops {

class RopeStage {
 public:
  static constexpr int kSlots = 5;

  RopeStage(int64_t d, int64_t elem_bytes) : d_(d), es_(elem_bytes) {}

  // Copies the row at `row` (t's last-dim stride) into slot k; the kernel operand reading it.
  RopeOperand in(int k, const TensorView& t, const char* row) {
    const int64_t step = t.strides[3] * es_;
    for (int64_t i = 0; i < d_; ++i) std::memcpy(buf_[k] + i * es_, row + i * step, es_);
    return single(k);
  }
  // The kernel operand writing slot k (copied to the tensor by flush).
  RopeOperand out(int k) { return single(k); }
  void flush(int k, const TensorView& t, char* row) const {
    const int64_t step = t.strides[3] * es_;
    for (int64_t i = 0; i < d_; ++i) std::memcpy(row + i * step, buf_[k] + i * es_, es_);
  }

 private:
  RopeOperand single(int k) {
    RopeOperand o;
    o.base = buf_[k];
    return o;
  }

  int64_t d_, es_;
  alignas(64) char buf_[kSlots][kRopeMaxD * 4];
};

}  // namespace tilegrad::ops
