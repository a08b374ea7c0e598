// Argument rules the forward and the grad of the rotary position embedding share. Dtypes fail with
// 161002; ranks, shapes and the mode with 561002 (ACLNN_ERR_INNER_TILING_ERROR), as the vendor's
// generated operators check them in their tiling (README.md, "Rules").
#pragma once

#include <cstdint>
#include <string>

#include "ops/posembedding/rotary_position_embedding/rope_layout.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

constexpr int64_t kRopeMaxD = 1024;  // the vendor's documented bound on the last dim

// The problem both operators solve, from x's (dy's) shape and cos's.
struct RopeShape {
  int64_t dims[3] = {0, 0, 0};      // leading dims of x (dy): the doc's (B, S, N) whatever the layout
  int64_t cos_dims[3] = {0, 0, 0};  // leading dims of cos / sin: each 1 or the x dim
  int64_t d = 0;                    // last dim
  RopeMode mode = RopeMode::kHalf;

  int64_t rows() const { return dims[0] * dims[1] * dims[2]; }
  int64_t cos_rows() const { return cos_dims[0] * cos_dims[1] * cos_dims[2]; }
  // Whether cos is broadcast over leading dim k (size 1 against a larger x dim).
  bool broadcast(int k) const { return cos_dims[k] != dims[k]; }
  // cos's shape in the doc's letters: "BSND" (same as x), "1S1D", "11ND", "1111"...: the vendor infers
  // the layout (BSND, BNSD, SBND) from this pattern; here every pattern is one loop.
  std::string cos_pattern() const;
};

// x (dy), cos and sin share one dtype among float32, float16, bfloat16 (161002).
void require_rope_dtypes(const char* op, const char* x_arg, const TensorView& x, const TensorView& cos,
                         const TensorView& sin);
// An output has the dtype of x (dy) (161002).
void require_rope_output_dtype(const char* op, const char* arg, const TensorView& out, const char* x_arg,
                               const TensorView& x);
// A 4-D tensor (561002).
void require_rope_rank(const char* op, const char* arg, const TensorView& t);
// mode in {0, 1, 2, 3} (561002).
RopeMode rope_mode(const char* op, int64_t mode);
// cos and sin have one shape; its last dim is x's, even (a multiple of 4 in the quarter mode) and
// at most kRopeMaxD; each leading dim is 1 or x's (561002). Ranks checked before.
RopeShape rope_shape(const char* op, const char* x_arg, const TensorView& x, const TensorView& cos,
                     const TensorView& sin, RopeMode mode);
// An output of exactly `shape` (561002).
void require_rope_output_shape(const char* op, const char* arg, const TensorView& out, const char* ref_arg,
                               const TensorView& ref);

// True when every row of t (last dim contiguous) starts on a 64-byte boundary: the kernels may then
// use aligned non-temporal stores (with partner offsets checked by the tiling).
bool rope_rows_aligned(const TensorView& t);
// The kernel view of a 4-D tensor, with zero strides on the dims where it is broadcast over x.
RopeOperand rope_operand(const TensorView& t);
// The last dim is contiguous (stride 1, or a single element).
inline bool rope_inner_contiguous(const TensorView& t) { return t.shape[3] <= 1 || t.strides[3] == 1; }

}  // namespace tilegrad::ops
