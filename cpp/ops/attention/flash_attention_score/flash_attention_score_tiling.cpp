#include "ops/attention/flash_attention_score/flash_attention_score_tiling.h"

#include <algorithm>

#include "core/workspace.h"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFlashAttentionScore";
// Query positions per GEMM of one head: large enough that oneDNN's per-call cost (a few
// microseconds) stays small against a 128 x 256 x D product, small enough that S (128 KiB; stacked
// GQA rows, up to kStackRows: 256 KiB) and its bf16 copy stay in L2 beside K and V. kv blocks of 256
// rather than 512 columns: the forward measured about 10% faster at SmolLM2's and Qwen3's shapes
// (bf16, 2 threads: 2.1-2.2 vs 2.4-2.7 ms and 8.8-9.0 vs 9.8-10.4 ms), also because a causal row
// block skips more of the masked columns. Constants, so a row's result depends on Skv, D and G only.
constexpr int64_t kBlockQ = 128;
constexpr int64_t kBlockKv = 256;
constexpr int64_t kStackRows = 256;
// Grad: kv blocks of 128 columns; the stacked query block (dK's and dV's GEMM reduction, dQ's GEMM
// rows) holds up to kGradStackRows rows.
constexpr int64_t kGradBlockKv = 128;
constexpr int64_t kGradBlockQ = 256;
constexpr int64_t kGradStackRows = 512;
// Grad: each (batch, kv head)'s kv blocks are dealt into at most kKvGroups groups, one task (and one
// fp32 dQ slab) each: enough tasks for two cores at B * N2 = 1, while the slabs (kKvGroups x fp32 dQ
// of workspace, read once more to sum them) stay small. A constant, so dQ's sums are grouped by Skv
// alone.
constexpr int64_t kKvGroups = 4;
// Fewest positions per stacked block (a large group still gets blocks of whole vectors of rows).
constexpr int64_t kMinPositions = 16;

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

// Query positions per stacked block of `group` heads: stack_rows / group rounded down to a power of
// two (block edges stay on the kv grid's powers of two, so causal skipping is as good as without
// stacking), between kMinPositions and per_head (the one-head block), at most q_len.
int64_t stacked_positions(int64_t per_head, int64_t stack_rows, int64_t group, int64_t q_len) {
  int64_t positions = per_head;
  while (positions > kMinPositions && positions * group > stack_rows) positions /= 2;
  return std::max<int64_t>(1, std::min(positions, q_len));
}
int64_t round64(int64_t bytes) { return core::align64(kOp, "workspace", bytes); }

int64_t packed_bytes(int64_t b, int64_t n, int64_t s, int64_t d, int64_t element_bytes = 4) {
  const int64_t rows = core::checked_mul(kOp, "workspace", core::checked_mul(kOp, "workspace", b, n), s);
  return round64(core::checked_mul(kOp, "workspace", rows, core::checked_mul(kOp, "workspace", d, element_bytes)));
}

// Bytes per packed q / k / v / dy element.
int64_t operand_bytes(const FlashAttentionShape& s) { return s.bf16_operands ? 2 : 4; }

void plan_common(FlashAttentionTiling& t, const FlashAttentionShape& s, const core::Platform& p) {
  t.shape = s;
  t.isa = p.isa;
  t.group = s.kv_heads > 0 ? std::max<int64_t>(1, s.heads / s.kv_heads) : 1;
}

void plan_forward_blocks(FlashAttentionTiling& t, const FlashAttentionShape& s) {
  t.block_q = stacked_positions(kBlockQ, kStackRows, t.group, s.q_len);
  t.block_kv = std::max<int64_t>(1, std::min(kBlockKv, s.kv_len));
  t.q_blocks = ceil_div(s.q_len, t.block_q);
  t.kv_blocks = ceil_div(s.kv_len, t.block_kv);
  t.tasks = core::checked_mul(kOp, "tasks", core::checked_mul(kOp, "tasks", s.batch, s.kv_heads), t.q_blocks);
}

int64_t finish(FlashAttentionTiling& t, int64_t offset, int64_t max_tasks, const core::Platform& p) {
  t.threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(std::max(p.threads, 1), max_tasks)));
  t.scratch_offset = offset;
  const FlashAttentionScratch sc = flash_attention_scratch(t);
  t.scratch_bytes_per_thread = sc.end;
  const int64_t scratch = core::checked_mul(kOp, "workspace", t.scratch_bytes_per_thread, t.threads);
  t.workspace_bytes = max_tasks > 0 ? core::checked_add(kOp, "workspace", offset, scratch) : 0;
  return t.workspace_bytes;
}

}  // namespace

FlashAttentionScratch flash_attention_scratch(const FlashAttentionTiling& t) {
  const FlashAttentionShape& s = t.shape;
  const int64_t rows = std::max(t.block_q, t.grad_block_q) * t.group;
  const int64_t block = std::max(t.block_q * t.block_kv, t.grad_block_q * t.grad_block_kv) * t.group;
  FlashAttentionScratch sc;
  int64_t at = 0;
  const auto take = [&](int64_t bytes) {
    const int64_t here = at;
    at += round64(bytes);
    return here;
  };
  sc.s = take(block * 4);
  sc.dp = t.grad ? take(block * 4) : at;
  // Forward: G block_q x Dv (output); grad: kv block x D (dK), x Dv (dV).
  sc.acc = take(std::max(t.block_q * t.group, t.grad_block_kv) * s.head_dim * 4);
  sc.acc2 = t.grad ? take(t.grad_block_kv * s.value_dim * 4) : at;
  sc.row_max = t.grad ? at : take(rows * 4);
  sc.row_sum = t.grad ? at : take(rows * 4);
  sc.lo = take(rows * 8);
  sc.hi = take(rows * 8);
  sc.p16 = s.bf16_operands ? take(block * 2) : at;
  sc.ds16 = s.bf16_operands && t.grad ? take(block * 2) : at;
  sc.end = at;
  return sc;
}

FlashAttentionTiling flash_attention_score_tiling(const FlashAttentionShape& s, const core::Platform& p) {
  FlashAttentionTiling t;
  plan_common(t, s, p);
  plan_forward_blocks(t, s);
  t.q_offset = 0;
  const int64_t e = operand_bytes(s);
  t.k_offset = packed_bytes(s.batch, s.heads, s.q_len, s.head_dim, e);
  t.v_offset = core::checked_add(kOp, "workspace", t.k_offset,
                                 packed_bytes(s.batch, s.kv_heads, s.kv_len, s.head_dim, e));
  const int64_t end = core::checked_add(kOp, "workspace", t.v_offset,
                                        packed_bytes(s.batch, s.kv_heads, s.kv_len, s.value_dim, e));
  finish(t, end, t.tasks, p);
  return t;
}

FlashAttentionTiling flash_attention_score_grad_tiling(const FlashAttentionShape& s, const core::Platform& p) {
  FlashAttentionTiling t;
  t.grad = true;
  plan_common(t, s, p);
  t.grad_block_kv = std::max<int64_t>(1, std::min(kGradBlockKv, s.kv_len));
  t.grad_block_q = stacked_positions(kGradBlockQ, kGradStackRows, t.group, s.q_len);
  t.grad_q_blocks = ceil_div(s.q_len, t.grad_block_q);
  t.grad_kv_blocks = ceil_div(s.kv_len, t.grad_block_kv);
  // At least one group: with Skv = 0 its slab is dQ's zeros.
  t.kv_groups = std::max<int64_t>(1, std::min(kKvGroups, t.grad_kv_blocks));
  const int64_t pairs = core::checked_mul(kOp, "tasks", s.batch, s.kv_heads);
  t.grad_tasks = core::checked_mul(kOp, "tasks", pairs, t.kv_groups);
  int64_t at = 0;
  const auto take = [&](int64_t bytes) {
    const int64_t here = at;
    at = core::checked_add(kOp, "workspace", at, bytes);
    return here;
  };
  const int64_t e = operand_bytes(s);
  t.q_offset = take(packed_bytes(s.batch, s.heads, s.q_len, s.head_dim, e));
  t.k_offset = take(packed_bytes(s.batch, s.kv_heads, s.kv_len, s.head_dim, e));
  t.v_offset = take(packed_bytes(s.batch, s.kv_heads, s.kv_len, s.value_dim, e));
  t.dy_offset = take(packed_bytes(s.batch, s.heads, s.q_len, s.value_dim, e));
  t.stats_offset = take(packed_bytes(s.batch, s.heads, s.q_len, 3));
  t.dq_slab_bytes = packed_bytes(1, t.group, s.q_len, s.head_dim);
  t.dq_offset = take(core::checked_mul(kOp, "workspace", t.grad_tasks, t.dq_slab_bytes));
  t.written_offset = take(round64(core::checked_mul(kOp, "workspace", t.grad_tasks, t.grad_q_blocks)));
  // The tasks, then B * N2 * grad_q_blocks units summing the slabs into dQ.
  finish(t, at, std::max(t.grad_tasks, core::checked_mul(kOp, "tasks", pairs, t.grad_q_blocks)), p);
  return t;
}

void FlashAttentionTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"batch", shape.batch},
            {"heads", shape.heads},
            {"kv_heads", shape.kv_heads},
            {"q_len", shape.q_len},
            {"kv_len", shape.kv_len},
            {"head_dim", shape.head_dim},
            {"value_dim", shape.value_dim},
            {"bf16_operands", shape.bf16_operands},
            {"group", group}});
  if (grad) {
    v.fields({{"grad_block_q", grad_block_q},
              {"grad_block_kv", grad_block_kv},
              {"kv_groups", kv_groups},
              {"grad_tasks", grad_tasks},
              {"dq_slab_bytes", dq_slab_bytes}});
  } else {
    v.fields({{"block_q", block_q}, {"block_kv", block_kv}, {"tasks", tasks}});
  }
  v.fields({{"threads_used", threads},  // the launch line has "threads" (the pool) already
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
