// Rotary position embedding, the part the kernels and tilings of both operators share (the forward
// aclnnRotaryPositionEmbedding and aclnnRotaryPositionEmbeddingGrad; the family lives in this
// folder, README.md): the modes, where each mode keeps the two elements of a rotated pair, and the
// walk over a 4-D tensor's rows. No tensors, no allocation.
//
// Every mode rotates pairs (first, second) of the last dim D:
//   y_first  = x_first  * cos_first  - x_second * sin_first
//   y_second = x_second * cos_second + x_first  * sin_second
// and differs only in where a pair's two elements sit in each tensor's row:
//   mode 0 half:            every tensor planar, pair i = (i, i + D/2)
//   mode 1 interleave:      every tensor interleaved, pair i = (2i, 2i + 1)
//   mode 2 quarter:         planar within each half: pairs (i, i + D/4) and (D/2 + i, 3D/4 + i)
//   mode 3 interleave-half: x (and dx) interleaved; cos, sin, y (dy, dcos, dsin) planar (0..D/2)
#pragma once

#include <cstdint>

namespace tilegrad::ops {

enum class RopeMode : int { kHalf = 0, kInterleave = 1, kQuarter = 2, kInterleaveHalf = 3 };

constexpr const char* rope_mode_name(RopeMode m) {
  switch (m) {
    case RopeMode::kHalf: return "half";
    case RopeMode::kInterleave: return "interleave";
    case RopeMode::kQuarter: return "quarter";
    default: return "interleave-half";
  }
}

// Pair positions per tensor role: x / dx; cos / sin / dcos / dsin; y / dy.
constexpr bool rope_x_interleaved(RopeMode m) { return m == RopeMode::kInterleave || m == RopeMode::kInterleaveHalf; }
constexpr bool rope_cos_interleaved(RopeMode m) { return m == RopeMode::kInterleave; }
constexpr bool rope_y_interleaved(RopeMode m) { return m == RopeMode::kInterleave; }

// A run of `pairs` pairs starting at element `base` of a planar row, second elements `partner`
// after the first (interleaved rows ignore base and partner: one block of D/2 pairs from 0).
struct RopeBlock {
  int64_t base, pairs, partner;
};

// The blocks of a row of D elements: one, or two for the quarter mode. Returns the count.
inline int rope_blocks(RopeMode m, int64_t d, RopeBlock* blocks) {
  if (m == RopeMode::kQuarter) {
    const int64_t q = d / 4;
    blocks[0] = {0, q, q};
    blocks[1] = {2 * q, q, q};
    return 2;
  }
  blocks[0] = {0, d / 2, d / 2};
  return 1;
}

// One tensor of a launch as the kernels see it: the address of element [0,0,0,0] and the byte
// strides of the three leading dims (0 on a broadcast dim). The last dim is contiguous.
struct RopeOperand {
  char* base = nullptr;
  int64_t stride[3] = {0, 0, 0};

  char* row(const int64_t* idx) const { return base + idx[0] * stride[0] + idx[1] * stride[1] + idx[2] * stride[2]; }
};

// Walks the rows (leading-dim multi-indices) of a [d0, d1, d2, D] tensor in row-major order from a
// linear row index.
struct RopeRowWalker {
  int64_t dims[3];
  int64_t idx[3];

  RopeRowWalker(const int64_t* d, int64_t row) : dims{d[0], d[1], d[2]} {
    idx[2] = dims[2] ? row % dims[2] : 0;
    const int64_t r = dims[2] ? row / dims[2] : 0;
    idx[1] = dims[1] ? r % dims[1] : 0;
    idx[0] = dims[1] ? r / dims[1] : 0;
  }
  void next() {
    if (++idx[2] < dims[2]) return;
    idx[2] = 0;
    if (++idx[1] < dims[1]) return;
    idx[1] = 0;
    ++idx[0];
  }
};

}  // namespace tilegrad::ops
