// The block steps the forward and the grad launches share: packing an operand to fp32, storing rows
// back in the caller's dtype and strides, the rows' column windows within a kv block, the explicit
// mask, and the two GEMM shapes (A B^T and A B on packed row-major fp32 blocks, through oneDNN).
#pragma once

#include <cstdint>

#include "ops/attention/flash_attention_score/fa_problem.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.h"

namespace tilegrad::ops::fa {

// dst (fp32 [B, n, seq, d], dense) = src * scale, rows spread over `threads`.
void pack(const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, float scale, float* dst,
          const FlashAttentionKernels& k, int threads);

// Rows (b, n, i0 + r), r < rows, of dst = round(src row r * factor) (src: rows x d, leading dim ld),
// factor = row_scale[r], or `scale` when row_scale is null.
void store_rows(const Heads& dst, int64_t b, int64_t n, int64_t i0, int64_t rows, int64_t d, const float* src,
                int64_t ld, const float* row_scale, float scale, const FlashAttentionKernels& k);

// Block-relative windows of query rows [i0, i0 + rows) in kv columns [c0, c0 + cols); true if any row
// keeps a column.
bool block_windows(const Problem& p, int64_t i0, int64_t rows, int64_t c0, int64_t cols, int64_t* lo, int64_t* hi);

// Writes -inf into s (rows x cols, ld) where the explicit mask of head (b, n) masks, inside the windows.
void apply_mask(const Problem& p, int64_t b, int64_t n, int64_t i0, int64_t rows, int64_t c0, int64_t cols,
                const int64_t* lo, const int64_t* hi, float* s, int64_t ld);

// c (m x n, ldc) = a (m x k, lda) b^T (b: n x k, ldb); or c += a b (b: k x n, ldb); or c += a^T b
// (a: k x m, lda). One single-threaded oneDNN call each (results independent of the thread count).
void gemm_abt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
              int64_t n, int64_t k);
void gemm_ab_add(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                 int64_t n, int64_t k);
void gemm_atb_add(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k);

// The kv block grid [c0, c0 + width) blocks that rows [i0, i0 + rows) can see: first c0 and the end.
struct KvRange {
  int64_t begin = 0, end = 0;
};
KvRange kv_range(const Problem& p, int64_t i0, int64_t rows, int64_t block);

}  // namespace tilegrad::ops::fa
