#include "ops/attention/flash_attention_score/fa_blocks.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/gemm.h"
#include "core/parallel.h"

namespace tilegrad::ops::fa {
namespace {

void store_float(DType d, char* p, float v) {
  switch (d) {
    case DType::kFloat32: std::memcpy(p, &v, 4); break;
    case DType::kFloat16: {
      const uint16_t h = core::f32_to_f16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    default: {
      const uint16_t h = core::f32_to_bf16(v);
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

core::GemmMatrix rowmajor(const void* p, DType dt, int64_t rows, int64_t cols, int64_t ld) {
  return core::GemmMatrix::rowmajor(p, dt, rows, cols, ld);
}

core::GemmMatrix rowmajor(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  return rowmajor(p, DType::kFloat32, rows, cols, ld);
}

}  // namespace

void pack(const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group, float scale, float* dst,
          const FlashAttentionKernels& k, int threads) {
  const int64_t es = dtype_size(src.dtype);
  core::parallel_for(batch * n * seq, threads, [&](int64_t row) {
    const int64_t s = row % seq, h = (row / seq) % n, b = row / (seq * n);
    const char* from = src.row(b, h, s);
    float* to = dst + packed_row(b, h, s, n, seq, group) * d;
    if (src.sd == 1) {
      k.widen(src.dtype, from, to, d, scale);
    } else {
      for (int64_t j = 0; j < d; ++j)
        to[j] = static_cast<float>(core::load_float_element(src.dtype, from + j * src.sd * es)) * scale;
    }
  });
}

void pack_bf16(const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group, uint16_t* dst,
               int threads) {
  core::parallel_for(batch * n * seq, threads, [&](int64_t row) {
    const int64_t s = row % seq, h = (row / seq) % n, b = row / (seq * n);
    const uint16_t* from = reinterpret_cast<const uint16_t*>(src.row(b, h, s));
    uint16_t* to = dst + packed_row(b, h, s, n, seq, group) * d;
    if (src.sd == 1) {
      std::memcpy(to, from, d * sizeof(uint16_t));
    } else {
      for (int64_t j = 0; j < d; ++j) to[j] = from[j * src.sd];
    }
  });
}

void pack_operand(DType op, const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group,
                  float scale, char* dst, const FlashAttentionKernels& k, int threads) {
  if (op == DType::kBFloat16)
    return pack_bf16(src, batch, n, seq, d, group, reinterpret_cast<uint16_t*>(dst), threads);
  pack(src, batch, n, seq, d, group, scale, reinterpret_cast<float*>(dst), k, threads);
}

void scale_block(float* s, int64_t ld, int64_t rows, int64_t cols, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    for (int64_t j = 0; j < cols; ++j) row[j] *= scale;
  }
}

void round_block_bf16(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                      const FlashAttentionKernels& k) {
  for (int64_t r = 0; r < rows; ++r)
    k.narrow(DType::kBFloat16, src + r * ld, reinterpret_cast<char*>(dst + r * ld), cols, 1.0f);
}

void store_rows(const Heads& dst, const RowBlock& rb, int64_t d, const float* src, int64_t ld, const float* row_scale,
                float scale, const FlashAttentionKernels& k) {
  const int64_t es = dtype_size(dst.dtype);
  for (int64_t r = 0; r < rb.rows(); ++r) {
    char* to = dst.row(rb.b, rb.head(r), rb.position(r));
    const float* from = src + r * ld;
    const float f = row_scale ? row_scale[r] : scale;
    if (dst.sd == 1) {
      k.narrow(dst.dtype, from, to, d, f);
    } else {
      for (int64_t j = 0; j < d; ++j) store_float(dst.dtype, to + j * dst.sd * es, from[j] * f);
    }
  }
}

bool block_windows(const Problem& p, const RowBlock& rb, int64_t c0, int64_t cols, int64_t* lo, int64_t* hi) {
  bool any = false;
  for (int64_t r = 0; r < rb.rows(); ++r) {
    const int64_t i = rb.position(r);
    lo[r] = std::clamp<int64_t>(p.window.lo(i) - c0, 0, cols);
    hi[r] = std::clamp<int64_t>(p.window.hi(i, p.g.kv_len) - c0, 0, cols);
    any = any || lo[r] < hi[r];
  }
  return any;
}

void apply_mask(const Problem& p, const RowBlock& rb, int64_t c0, const int64_t* lo, const int64_t* hi, float* s,
                int64_t ld) {
  if (!p.mask.data) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rb.rows(); ++r) {
    const int64_t n = rb.head(r), i = rb.position(r);
    for (int64_t j = lo[r]; j < hi[r]; ++j)
      if (p.mask.masked(rb.b, n, i, c0 + j)) s[r * ld + j] = kNegInf;
  }
}

void gemm_abt(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
              int64_t n, int64_t k) {
  core::gemm_plain(rowmajor(a, dt, m, k, lda), rowmajor(b, dt, n, k, ldb).t(), rowmajor(c, m, n, ldc), false, 1);
}

void gemm_ab(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
             int64_t n, int64_t k, bool accumulate) {
  core::gemm_plain(rowmajor(a, dt, m, k, lda), rowmajor(b, dt, k, n, ldb), rowmajor(c, m, n, ldc), accumulate, 1);
}

void gemm_atb_add(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k) {
  core::gemm_plain(rowmajor(a, dt, k, m, lda).t(), rowmajor(b, dt, k, n, ldb), rowmajor(c, m, n, ldc), true, 1);
}

KvRange kv_range(const Problem& p, int64_t i0, int64_t positions, int64_t block) {
  // Windows move right with the position (fixed offsets), so the union is [lo(first), hi(last)).
  const int64_t lo = p.window.lo(i0), hi = p.window.hi(i0 + positions - 1, p.g.kv_len);
  if (positions <= 0 || lo >= hi) return {};
  return {lo / block * block, hi};
}

}  // namespace tilegrad::ops::fa
