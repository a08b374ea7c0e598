#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_tiling.h"

#include <algorithm>
#include <cstdlib>

#include "core/workspace.h"

namespace tilegrad::ops {
namespace {

// Reserves count * elem_bytes bytes named `what` in ws: the region's offset and (unpadded) size.
void place(core::WorkspaceLayout& ws, const char* op, const char* what, int64_t count, int64_t elem_bytes,
           uint64_t& offset, uint64_t& bytes) {
  bytes = static_cast<uint64_t>(core::checked_mul(op, what, count, elem_bytes));
  offset = static_cast<uint64_t>(ws.take(what, count, elem_bytes));
}

// rows x cols elements, checked.
int64_t elements(const char* op, const char* what, int64_t rows, int64_t cols) {
  return core::checked_mul(op, what, rows, cols);
}

// Splits n into near-equal chunks of about `target` (multiples of 16 unless the whole of n), never
// smaller than min(n, kFlceMinChunk).
int64_t balanced_chunk(int64_t n, int64_t target) {
  if (n <= 0) return 0;
  target = std::max<int64_t>(1, std::min(n, target));
  int64_t num = (n + target - 1) / target;
  if ((n + num - 1) / num < std::min(n, kFlceMinChunk)) num = std::max<int64_t>(1, n / kFlceMinChunk);
  int64_t c = (n + num - 1) / num;
  if (num > 1) c = std::min(n, (c + 15) / 16 * 16);
  return c;
}

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

// Chunks (outer, inner) for an n_outer x n_inner problem with `elem` bytes per block element:
// the inner dimension whole when a block of min(n_outer, kFlceMinChunk) rows of it fits the budget,
// then as many outer rows as fit, never fewer than kFlceMinChunk.
void pick_chunks(int64_t n_outer, int64_t n_inner, int64_t elem, int64_t budget, int64_t* c_outer, int64_t* c_inner) {
  budget = std::max<int64_t>(budget, 1);
  const int64_t min_outer = std::min(n_outer, kFlceMinChunk);
  int64_t ci = n_inner;
  if (min_outer * n_inner * elem > budget)
    ci = std::max(std::min(n_inner, kFlceMinChunk), budget / (elem * std::max<int64_t>(min_outer, 1)) / 64 * 64);
  ci = balanced_chunk(n_inner, ci);
  const int64_t co = std::max(min_outer, budget / (elem * std::max<int64_t>(ci, 1)));
  *c_outer = balanced_chunk(n_outer, co);
  *c_inner = ci;
}

}  // namespace

namespace {
int64_t env_bytes(const char* name, int64_t fallback, bool zero_ok) {
  const char* env = std::getenv(name);
  if (env && *env) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end && *end == '\0' && (v > 0 || (zero_ok && v == 0))) return v;
  }
  return fallback;
}
}  // namespace

int64_t flce_budget() { return env_bytes("TILEGRAD_FLCE_BUDGET", kFlceDefaultBudget, false); }

double flce_filter_min_skipped_share() {
  return double(std::min<int64_t>(100, env_bytes("TILEGRAD_FLCE_FILTER_MIN_SKIP", kFlceFilterMinSkipPercent, true))) /
         100.0;
}

const char* flce_plan_name(FlcePlan p) {
  switch (p) {
    case FlcePlan::kWhole: return "whole";
    case FlcePlan::kChunked: return "chunked";
    default: return "vocab_outer";
  }
}

FlceForwardTiling flce_forward_tiling(const char* op, int64_t bt, int64_t h, int64_t v, int64_t dtype_size, bool input_gemmable,
                                      bool weight_gemmable, int64_t budget_bytes, const core::Platform& platform) {
  FlceForwardTiling t;
  static_cast<FlceProblem&>(t) = FlceProblem(bt, h, v, platform);
  if (bt == 0 || v == 0) return t;
  // Rows are the outer dimension (a row's online max/sum needs its V chunks in order).
  pick_chunks(bt, v, 4, budget_bytes, &t.bt_chunk, &t.v_chunk);
  t.num_bt_chunks = ceil_div(bt, t.bt_chunk);
  t.num_v_chunks = ceil_div(v, t.v_chunk);
  core::WorkspaceLayout ws(op);
  place(ws, op, "workspace logits block", elements(op, "workspace logits block", t.bt_chunk, t.v_chunk), 4,
        t.logits_offset, t.logits_bytes);
  if (!input_gemmable && h > 0)
    place(ws, op, "workspace input copy", elements(op, "workspace input copy", bt, h), dtype_size, t.input_copy_offset,
          t.input_copy_bytes);
  if (!weight_gemmable && h > 0)
    place(ws, op, "workspace weight copy", elements(op, "workspace weight copy", v, h), dtype_size,
          t.weight_copy_offset, t.weight_copy_bytes);
  t.workspace_bytes = static_cast<uint64_t>(ws.bytes());
  return t;
}

namespace {

FlceGradTiling grad_tiling_for_order(const char* op, int64_t bt, int64_t h, int64_t v, int64_t dsize, bool recompute, bool in_ok,
                                     bool w_ok, bool gin_ok, bool gw_ok, int64_t budget, const core::Platform& p,
                                     bool v_outer) {
  FlceGradTiling t;
  static_cast<FlceProblem&>(t) = FlceProblem(bt, h, v, p);
  t.recompute = recompute;
  t.v_outer = v_outer;
  if (bt == 0 || v == 0 || h == 0) return t;
  const bool g_aliases_logits = recompute && dsize == 4;
  const int64_t elem = (recompute ? 4 : 0) + (g_aliases_logits ? 0 : dsize);
  if (v_outer) pick_chunks(v, bt, elem, budget, &t.v_chunk, &t.bt_chunk);
  else pick_chunks(bt, v, elem, budget, &t.bt_chunk, &t.v_chunk);
  t.num_bt_chunks = ceil_div(bt, t.bt_chunk);
  t.num_v_chunks = ceil_div(v, t.v_chunk);
  t.grad_input_direct = t.num_v_chunks == 1 && gin_ok;
  t.grad_weight_direct = t.num_bt_chunks == 1 && gw_ok;
  t.acc_input_rows = t.grad_input_direct ? 0 : (v_outer ? bt : t.bt_chunk);
  t.acc_weight_rows = t.grad_weight_direct ? 0 : (v_outer ? t.v_chunk : v);
  const int64_t block = elements(op, "workspace logits block", t.bt_chunk, t.v_chunk);
  core::WorkspaceLayout ws(op);
  if (recompute) place(ws, op, "workspace logits block", block, 4, t.logits_offset, t.logits_bytes);
  if (g_aliases_logits) {
    t.g_offset = t.logits_offset;
    t.g_bytes = t.logits_bytes;
  } else {
    place(ws, op, "workspace G block", block, dsize, t.g_offset, t.g_bytes);
  }
  place(ws, op, "workspace grad_input accumulator", elements(op, "workspace grad_input accumulator", t.acc_input_rows, h),
        4, t.acc_input_offset, t.acc_input_bytes);
  place(ws, op, "workspace grad_weight accumulator",
        elements(op, "workspace grad_weight accumulator", t.acc_weight_rows, h), 4, t.acc_weight_offset,
        t.acc_weight_bytes);
  if (!in_ok)
    place(ws, op, "workspace input copy", elements(op, "workspace input copy", bt, h), dsize, t.input_copy_offset,
          t.input_copy_bytes);
  if (!w_ok)
    place(ws, op, "workspace weight copy", elements(op, "workspace weight copy", v, h), dsize, t.weight_copy_offset,
          t.weight_copy_bytes);
  t.workspace_bytes = static_cast<uint64_t>(ws.bytes());
  return t;
}

}  // namespace

FlceGradTiling flce_grad_tiling(const char* op, int64_t bt, int64_t h, int64_t v, int64_t dtype_size, bool recompute,
                                bool input_gemmable, bool weight_gemmable, bool grad_input_gemmable,
                                bool grad_weight_gemmable, int64_t budget_bytes, const core::Platform& platform,
                                int force_order) {
  const auto make = [&](bool v_outer) {
    return grad_tiling_for_order(op, bt, h, v, dtype_size, recompute, input_gemmable, weight_gemmable,
                                 grad_input_gemmable, grad_weight_gemmable, budget_bytes, platform, v_outer);
  };
  if (force_order == 1) return make(true);
  if (force_order == 2) return make(false);
  FlceGradTiling a = make(true), b = make(false);
  return b.workspace_bytes < a.workspace_bytes ? b : a;
}

FlceFusedTiling flce_fused_tiling(const char* op, int64_t bt, int64_t h, int64_t v, int64_t dsize, bool in_ok, bool w_ok,
                                  bool gin_ok, bool gw_ok, int64_t budget, const core::Platform& p,
                                  bool gw_wanted) {
  FlceFusedTiling t;
  static_cast<FlceProblem&>(t) = FlceProblem(bt, h, v, p);
  t.budget = budget;
  // Empty problems take the block path (it writes the zeros and handles H = 0 logits).
  const bool ready = in_ok && w_ok && gin_ok && gw_ok && bt > 0 && v > 0 && h > 0;
  // Bytes per chunk row: fp32 logits, plus a dense G row for 16-bit dtypes.
  const uint64_t per_row = uint64_t(v) * 4 + (dsize == 4 ? 0 : uint64_t(v) * dsize);
  const uint64_t b = uint64_t(std::max<int64_t>(budget, 0));
  // The fp32 grad_weight accumulator of 16-bit weights (none when grad_weight is not computed).
  const uint64_t acc = dsize == 4 || !gw_wanted
                           ? 0
                           : static_cast<uint64_t>(core::aligned_bytes(
                                 op, "workspace grad_weight accumulator",
                                 elements(op, "workspace grad_weight accumulator", v, h), 4));
  int64_t rows = 0;
  if (ready && uint64_t(bt) * per_row + 128 <= b) {
    t.plan = FlcePlan::kWhole;
    rows = bt;
  } else if (ready && b > acc + 128 && int64_t((b - acc - 128) / per_row) >= std::min(bt, kFlceMinChunkRows)) {
    t.plan = FlcePlan::kChunked;
    // Near-equal chunks (multiples of 16 rows) of at most the rows that fit.
    const int64_t fit = int64_t((b - acc - 128) / per_row);
    const int64_t num = ceil_div(bt, fit);
    rows = std::min(fit, std::min(bt, (ceil_div(bt, num) + 15) / 16 * 16));
  } else {
    t.plan = FlcePlan::kVocabOuter;
    // The budget covers the whole workspace here too: the blocks get what the accumulators and
    // copies leave (never less than the tilings' minimum chunks).
    int64_t block_budget = std::max<int64_t>(budget, 1);
    for (int round = 0; round < 4; ++round) {
      t.fwd = flce_forward_tiling(op, bt, h, v, dsize, in_ok, w_ok, block_budget, p);
      t.grad = flce_grad_tiling(op, bt, h, v, dsize, true, in_ok, w_ok, gin_ok, gw_ok, block_budget, p);
      t.workspace_bytes = std::max(t.fwd.workspace_bytes, t.grad.workspace_bytes);
      if (t.workspace_bytes <= b || block_budget == 1) break;
      block_budget = std::max<int64_t>(1, block_budget - int64_t(t.workspace_bytes - b));
    }
    return t;
  }
  t.chunk_rows = rows;
  t.num_chunks = ceil_div(bt, rows);
  const int64_t chunk = elements(op, "workspace logits chunk", rows, v);
  core::WorkspaceLayout ws(op);
  place(ws, op, "workspace logits chunk", chunk, 4, t.logits_offset, t.logits_bytes);
  if (dsize != 4) place(ws, op, "workspace G chunk", chunk, dsize, t.g_offset, t.g_bytes);
  if (dsize != 4 && t.num_chunks > 1 && gw_wanted)
    place(ws, op, "workspace grad_weight accumulator", elements(op, "workspace grad_weight accumulator", v, h), 4,
          t.acc_weight_offset, t.acc_weight_bytes);
  t.workspace_bytes = static_cast<uint64_t>(ws.bytes());
  return t;
}

namespace {

// The fields the forward and gradient tilings share, around the ones of their own.
template <class Tiling>
void describe_blocks(const Tiling& t, core::FieldVisitor& f, std::initializer_list<core::Field> own) {
  f.fields({{"bt", t.bt}, {"h", t.h}, {"v", t.v}, {"bt_chunk", t.bt_chunk}, {"v_chunk", t.v_chunk},
            {"num_bt_chunks", t.num_bt_chunks}, {"num_v_chunks", t.num_v_chunks}});
  f.fields(own);
  f.fields({{"input_copy_offset", t.input_copy_offset}, {"input_copy_bytes", t.input_copy_bytes},
            {"weight_copy_offset", t.weight_copy_offset}, {"weight_copy_bytes", t.weight_copy_bytes},
            {"workspace_bytes", t.workspace_bytes}, {"isa", t.isa}});
}

}  // namespace

void FlceForwardTiling::describe(core::FieldVisitor& f) const {
  describe_blocks(*this, f, {{"logits_offset", logits_offset}, {"logits_bytes", logits_bytes}});
}

void FlceGradTiling::describe(core::FieldVisitor& f) const {
  describe_blocks(*this, f,
                  {{"recompute", recompute}, {"v_outer", v_outer}, {"grad_input_direct", grad_input_direct},
                   {"grad_weight_direct", grad_weight_direct}, {"acc_input_rows", acc_input_rows},
                   {"acc_weight_rows", acc_weight_rows}, {"logits_offset", logits_offset},
                   {"logits_bytes", logits_bytes}, {"g_offset", g_offset}, {"g_bytes", g_bytes},
                   {"acc_input_offset", acc_input_offset}, {"acc_input_bytes", acc_input_bytes},
                   {"acc_weight_offset", acc_weight_offset}, {"acc_weight_bytes", acc_weight_bytes}});
}

void FlceFusedTiling::describe(core::FieldVisitor& f) const {
  f.fields({{"plan", flce_plan_name(plan)}, {"gemms", plan == FlcePlan::kVocabOuter ? 4 : 3}, {"budget", budget},
            {"chunk_rows", chunk_rows}, {"num_chunks", num_chunks}, {"logits_bytes", logits_bytes},
            {"g_bytes", g_bytes}, {"acc_weight_bytes", acc_weight_bytes}, {"workspace_bytes", workspace_bytes}});
  if (plan == FlcePlan::kVocabOuter)
    f.fields({{"bt_chunk", grad.bt_chunk}, {"v_chunk", grad.v_chunk}, {"v_outer", grad.v_outer},
              {"grad_input_direct", grad.grad_input_direct}, {"grad_weight_direct", grad.grad_weight_direct},
              {"fwd_bt_chunk", fwd.bt_chunk}, {"fwd_v_chunk", fwd.v_chunk}});
}

}  // namespace tilegrad::ops
