// The block steps the forward and the grad launches share: packing an operand (fp32, or bf16 for
// bf16 inputs), storing rows back in the caller's dtype and strides, the rows' column windows within
// a kv block, the explicit mask, and the three GEMM shapes on packed row-major blocks through oneDNN
// (operands fp32 or bf16, fp32 accumulation and results).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/parallel.h"
#include "ops/attention/flash_attention_score/fa_problem.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.h"

namespace tilegrad::ops::fa {

// GQA stacking: the `group` query heads that share one kv head are packed position-major,
// [B, n / group, seq, group, d], so the rows of one kv head's group at consecutive positions are one
// dense matrix and each kv block is multiplied once per group (one GEMM with group x positions rows)
// instead of once per query head. K and V are packed with group 1 ([B, n, seq, d]).
// Packed row of element (b, h, s) of [B, n, seq, ...] stacked by `group`.
inline int64_t packed_row(int64_t b, int64_t h, int64_t s, int64_t n, int64_t seq, int64_t group) {
  return ((b * (n / group) + h / group) * seq + s) * group + h % group;
}

// Rows of one stacked block: the group query heads head0 .. head0 + group - 1 of batch b at positions
// [i0, i0 + positions), position-major (row r: position i0 + r / group, head head0 + r % group). The
// rows of one position share their mask window, so a causal or band pattern repeats per head.
// group 1: plain rows i0 .. of head head0.
struct RowBlock {
  int64_t b = 0, head0 = 0, group = 1, i0 = 0, positions = 0;
  int64_t rows() const { return positions * group; }
  int64_t head(int64_t r) const { return head0 + r % group; }
  int64_t position(int64_t r) const { return i0 + r / group; }
};

// dst (fp32 [B, n, seq, d] stacked by group, dense) = src * scale, rows spread over `threads`.
void pack(const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group, float scale, float* dst,
          const FlashAttentionKernels& k, int threads);

// dst (bf16 [B, n, seq, d] stacked by group, dense) = src (bf16), an exact copy; rows spread over `threads`.
void pack_bf16(const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group, uint16_t* dst,
               int threads);

// The GEMM operand dtype of a launch's packed q, k, v, dy, P and dS: bf16 for bf16 inputs (their
// tiling's bf16_operands), fp32 otherwise.
inline DType operand_dtype(bool bf16_operands) { return bf16_operands ? DType::kBFloat16 : DType::kFloat32; }
// Packs src as the launch's operand: fp32 times `scale` (pack), or an exact bf16 copy (pack_bf16; the
// scale is then applied after the GEMM).
void pack_operand(DType op, const Heads& src, int64_t batch, int64_t n, int64_t seq, int64_t d, int64_t group,
                  float scale, char* dst, const FlashAttentionKernels& k, int threads);
// Address of element `index` of a packed operand of dtype op.
inline const char* element(const char* base, DType op, int64_t index) { return base + index * dtype_size(op); }

// s (rows x cols, ld) *= scale.
void scale_block(float* s, int64_t ld, int64_t rows, int64_t cols, float scale);

// dst (bf16, rows x cols, leading dim ld) = src (fp32, the same geometry) rounded to nearest even.
void round_block_bf16(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                      const FlashAttentionKernels& k);

// The block's rows of dst = round(src row r * factor) (src: rows() x d, leading dim ld), factor =
// row_scale[r], or `scale` when row_scale is null.
void store_rows(const Heads& dst, const RowBlock& rb, int64_t d, const float* src, int64_t ld, const float* row_scale,
                float scale, const FlashAttentionKernels& k);

// Block-relative windows of the block's rows in kv columns [c0, c0 + cols); true if any row keeps a
// column.
bool block_windows(const Problem& p, const RowBlock& rb, int64_t c0, int64_t cols, int64_t* lo, int64_t* hi);

// Writes -inf into s (rows() x cols, ld) where the explicit mask masks a row's head and position,
// inside the windows.
void apply_mask(const Problem& p, const RowBlock& rb, int64_t c0, const int64_t* lo, const int64_t* hi, float* s,
                int64_t ld);

// c (m x n, ldc) = a (m x k, lda) b^T (b: n x k, ldb); or c = a b (b: k x n, ldb), c += a b when
// `accumulate`; or c += a^T b (a: k x m, lda). a and b of dtype dt (fp32 or bf16; leading dims in
// elements), c fp32. One single-threaded oneDNN call each (results independent of the thread count;
// a call's sums run in one order fixed by its shape, the accumulation into c included).
void gemm_abt(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
              int64_t n, int64_t k);
void gemm_ab(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
             int64_t n, int64_t k, bool accumulate);
inline void gemm_ab_add(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc,
                        int64_t m, int64_t n, int64_t k) {
  gemm_ab(dt, a, lda, b, ldb, c, ldc, m, n, k, true);
}
void gemm_atb_add(DType dt, const void* a, int64_t lda, const void* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k);

// Runs task(index, scratch) for index in [0, tasks) on `threads` threads, thread `slot` with its own
// scratch area (scratch + slot * scratch_bytes). A thread takes the next index as it finishes a task,
// so uneven tasks (a causal mask's) even out; `descending` hands out the highest index first (the
// forward's later query blocks see more kv blocks: heaviest first). Each task writes only its own
// outputs, in an order fixed inside it, so which thread runs it never changes a bit.
template <class Task>
void run_tasks(int64_t tasks, int threads, char* scratch, int64_t scratch_bytes, bool descending, Task&& task) {
  std::atomic<int64_t> next{0};
  core::parallel_for(threads, threads, [&](int64_t slot) {
    char* mine = scratch + slot * scratch_bytes;
    for (int64_t i = next.fetch_add(1); i < tasks; i = next.fetch_add(1)) task(descending ? tasks - 1 - i : i, mine);
  });
}

// The kv block grid [c0, c0 + width) blocks that positions [i0, i0 + positions) can see: first c0
// and the end.
struct KvRange {
  int64_t begin = 0, end = 0;
};
KvRange kv_range(const Problem& p, int64_t i0, int64_t positions, int64_t block);

}  // namespace tilegrad::ops::fa
