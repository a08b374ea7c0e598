// Flash attention plans: pure functions of the geometry and the Platform, never of the data.
//
// GQA stacking: the G = N1 / N2 query heads sharing a kv head run as one block of G x positions rows
// (position-major, fa_blocks.h), so each kv block is multiplied once per group. Forward: one task per
// (batch, kv head, block of block_q query positions); a task walks the key/value blocks of block_kv
// columns its positions can see (a fixed grid, so a row's result never depends on the thread count)
// with an online softmax. Grad, one pass: each (batch, kv head)'s kv blocks of grad_block_kv columns
// are dealt round-robin into kv_groups groups (block j to group j % kv_groups, kv_groups a function of
// Skv alone); one task per (batch, kv head, kv group) walks its kv blocks in order and, for each, the
// query blocks in order: P and dS once, dK and dV summed for the kv block (each block's G x
// grad_block_q rows inside one GEMM) and dQ's contributions dS K into the task's own fp32 slab. A
// last parallel pass sums each query block's slabs in group order and stores dQ. A thread takes the
// next task as it finishes one (fa::run_tasks, heaviest first under a causal mask, so uneven tasks
// even out); each task's sums run in one fixed order, so the thread that runs it changes nothing.
//
// Workspace: q/k/v (and dy for the grad) packed [B, N, S, D] (q and dy stacked by group): widened to
// fp32 (q pre-multiplied by scale, so S = (scale q) k^T comes out of the GEMM scaled), or for bf16
// inputs copied as bf16 (S scaled after the GEMM, dK scaled when stored); the grad's per-row
// statistics (stacked rows), its dQ slabs (kv_groups x fp32 dQ) with one flag byte per (slab, query
// block), then one scratch area per thread.
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

struct FlashAttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
  // bf16 inputs: q, k, v, dy packed as bf16 (exact) and every GEMM takes bf16 operands (P and dS
  // rounded to bf16 as operands only), fp32 accumulation; otherwise everything is packed as fp32.
  bool bf16_operands = false;
};

struct FlashAttentionTiling {
  FlashAttentionShape shape;
  int64_t group = 1;                   // G = N1 / N2: query heads stacked per block (rows = G x positions)
  int64_t block_q = 0, block_kv = 0;   // forward blocks (block_q in query positions; 0 in the grad's plan)
  int64_t q_blocks = 0, kv_blocks = 0;
  int64_t tasks = 0;                   // forward tasks: B * N2 * q_blocks
  // Grad only: query blocks of grad_block_q positions (G x as many rows), kv blocks of grad_block_kv
  // columns dealt into kv_groups groups; grad_tasks = B * N2 * kv_groups (one dQ slab each).
  int64_t grad_block_q = 0, grad_block_kv = 0, grad_q_blocks = 0, grad_kv_blocks = 0;
  int64_t kv_groups = 0, grad_tasks = 0;
  int threads = 1;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0, dy_offset = 0;  // packed fp32 operands (dy: grad only)
  int64_t stats_offset = 0;            // grad: max, 1/sum, rowsum(dy * out) per query row, fp32 each
  // Grad: the dQ slabs, one per task ((batch * N2 + kv head) * kv_groups + group), dq_slab_bytes apart
  // (G * Sq x D fp32, the (batch, kv head)'s stacked rows), then written_offset: one byte per (slab,
  // query block), set when the group wrote the block's rows.
  int64_t dq_offset = 0, dq_slab_bytes = 0, written_offset = 0;
  int64_t scratch_offset = 0, scratch_bytes_per_thread = 0;
  int64_t workspace_bytes = 0;
  bool grad = false;
  Isa isa = Isa::kScalar;

  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

// One thread's scratch (byte offsets from its start): the S block (P after the softmax), the grad's
// dP block (dS after it), the accumulators (the forward's output; the grad's dK and dV), the
// forward's per-row max / sum, the rows' column windows (int64); with bf16 operands, P and dS
// rounded to bf16 (same geometry as S).
struct FlashAttentionScratch {
  int64_t s = 0, dp = 0, acc = 0, acc2 = 0, row_max = 0, row_sum = 0, lo = 0, hi = 0, p16 = 0, ds16 = 0, end = 0;
};
TILEGRAD_API FlashAttentionScratch flash_attention_scratch(const FlashAttentionTiling& t);

TILEGRAD_API FlashAttentionTiling flash_attention_score_tiling(const FlashAttentionShape& shape,
                                                               const core::Platform& platform);
TILEGRAD_API FlashAttentionTiling flash_attention_score_grad_tiling(const FlashAttentionShape& shape,
                                                                    const core::Platform& platform);

}  // namespace tilegrad::ops
