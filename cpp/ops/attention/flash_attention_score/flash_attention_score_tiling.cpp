#include "ops/attention/flash_attention_score/flash_attention_score_tiling.h"

#include <algorithm>

#include "core/workspace.h"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFlashAttentionScore";
// Query rows per GEMM: large enough that oneDNN's per-call cost (a few microseconds) stays small
// against a 128 x 512 x D product, small enough that S (256 KiB) stays in L2. Constants, so a row's
// result depends on Skv and D only.
constexpr int64_t kBlockQ = 128;
constexpr int64_t kBlockKv = 512;
// Pass B (dK, dV): kv blocks of 128 give B * N2 * Skv / 128 tasks to spread over the threads.
constexpr int64_t kGradBlockKv = 128;
constexpr int64_t kGradBlockQ = 256;

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }
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
  t.block_q = std::max<int64_t>(1, std::min(kBlockQ, s.q_len));
  t.block_kv = std::max<int64_t>(1, std::min(kBlockKv, s.kv_len));
  t.q_blocks = ceil_div(s.q_len, t.block_q);
  t.kv_blocks = ceil_div(s.kv_len, t.block_kv);
  t.tasks = core::checked_mul(kOp, "tasks", core::checked_mul(kOp, "tasks", s.batch, s.heads), t.q_blocks);
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
  const int64_t rows = std::max(t.block_q, t.grad_block_q);
  const int64_t block = std::max(t.block_q * t.block_kv, t.grad_block_q * t.grad_block_kv);
  FlashAttentionScratch sc;
  int64_t at = 0;
  const auto take = [&](int64_t bytes) {
    const int64_t here = at;
    at += round64(bytes);
    return here;
  };
  sc.s = take(block * 4);
  sc.dp = t.grad ? take(block * 4) : at;
  // Forward: block_q x Dv (output); pass A: block_q x D (dQ); pass B: kv block x D (dK), x Dv (dV).
  sc.acc = take(std::max(t.block_q, t.grad_block_kv) * s.head_dim * 4);
  sc.acc2 = t.grad ? take(t.grad_block_kv * s.value_dim * 4) : at;
  sc.row_max = take(rows * 4);
  sc.row_sum = take(rows * 4);
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
  t.grad_block_q = std::max<int64_t>(1, std::min(kGradBlockQ, s.q_len));
  t.grad_kv_blocks = ceil_div(s.kv_len, t.grad_block_kv);
  t.grad_kv_tasks = core::checked_mul(kOp, "tasks", core::checked_mul(kOp, "tasks", s.batch, s.kv_heads), t.grad_kv_blocks);
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
  finish(t, at, std::max(t.tasks, t.grad_kv_tasks), p);
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
            {"block_q", block_q},
            {"block_kv", block_kv},
            {"tasks", tasks},
            {"grad_block_q", grad_block_q},
            {"grad_block_kv", grad_block_kv},
            {"grad_kv_tasks", grad_kv_tasks},
            {"threads_used", threads},  // the launch line has "threads" (the pool) already
            {"workspace_bytes", workspace_bytes},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
