// Tilings of the fused linear cross-entropy family: pure functions of the shapes, the dtype size,
// which operands oneDNN can take in place, a memory budget and the Platform (`op` names the operator
// in the error of a workspace size that overflows int64).
//
// Forward (OnlineMaxSum): blocks of (bt_chunk x v_chunk) fp32 logits, one GEMM each, then the
// online max / sum-exp per row. Gradient: blocks of (bt_chunk x v_chunk); per block G (fp32 ->
// input dtype) then grad_input += G @ W_chunk and grad_weight += G^T @ X_chunk. The loop order picks
// the smaller fp32 accumulator: V-outer keeps grad_weight complete per V chunk and accumulates
// grad_input (BT x H fp32) across V chunks; BT-outer the reverse (V x H fp32). A gradient whose
// summation is not split across chunks is written by its GEMM directly (no accumulator).
#pragma once

#include <cstdint>

#include "core/describe.h"
#include "core/platform.h"
#include "tilegrad/export.h"

namespace tilegrad::ops {

constexpr int64_t kFlceDefaultBudget = int64_t(64) << 20;  // bytes (see flce_budget)
constexpr int64_t kFlceMinChunk = 256;                     // rows per chunk, when the dimension has them
constexpr int64_t kFlceMinChunkRows = 128;  // three-GEMM plan: fewest rows per chunk worth the fp32 re-reads

// Bounded filtering: below this share of skippable blocks (percent) a gradient product runs whole
// (every block: exact, within any bound): its per-output-block GEMMs (64 rows of G, or 128
// vocabulary rows) re-pack the other operand for each block and cost about 1.5x the whole product's
// GEMM per block they run (measured bf16, H = 2048: skipping 8% of grad_input's blocks made the call
// 13% slower), so fewer skips lose time. TILEGRAD_FLCE_FILTER_MIN_SKIP (percent, read at each call;
// 0: skip whatever the bound allows) overrides it.
constexpr int64_t kFlceFilterMinSkipPercent = 35;
double flce_filter_min_skipped_share();

// The memory budget: TILEGRAD_FLCE_BUDGET (bytes, read at each phase 1) or kFlceDefaultBudget.
// For the aclnn gradient and forward operators it bounds the logits / G block (accumulators come on
// top); for the single-process op it is the whole workspace of the three-GEMM plans and picks the plan.
TILEGRAD_API int64_t flce_budget();

// What every tiling of the family starts from: the logits' shape (BT x V, hidden H) and the Platform's
// threads and ISA.
struct FlceProblem {
  int64_t bt = 0, h = 0, v = 0;
  int threads = 1;
  Isa isa = Isa::kScalar;
  FlceProblem() = default;
  FlceProblem(int64_t bt_, int64_t h_, int64_t v_, const core::Platform& p)
      : bt(bt_), h(h_), v(v_), threads(p.threads > 1 ? p.threads : 1), isa(p.isa) {}
};

struct FlceForwardTiling : FlceProblem {
  int64_t bt_chunk = 0, v_chunk = 0, num_bt_chunks = 0, num_v_chunks = 0;
  uint64_t logits_offset = 0, logits_bytes = 0;          // fp32 block, ld v_chunk
  uint64_t input_copy_offset = 0, input_copy_bytes = 0;  // contiguous copy when oneDNN can't take the view
  uint64_t weight_copy_offset = 0, weight_copy_bytes = 0;
  uint64_t workspace_bytes = 0;

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h);
  // not `threads`, the Platform's thread count (the trace prints it; the plan never depends on it).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};

TILEGRAD_API FlceForwardTiling flce_forward_tiling(const char* op, int64_t bt, int64_t h, int64_t v,
                                                   int64_t dtype_size, bool input_gemmable, bool weight_gemmable,
                                                   int64_t budget_bytes, const core::Platform& platform);

struct FlceGradTiling : FlceProblem {
  bool recompute = false;  // memory-saving mode: logits recomputed per block
  bool v_outer = true;     // loop order
  int64_t bt_chunk = 0, v_chunk = 0, num_bt_chunks = 0, num_v_chunks = 0;
  bool grad_input_direct = false, grad_weight_direct = false;  // GEMM writes the output itself
  int64_t acc_input_rows = 0, acc_weight_rows = 0;             // fp32 accumulators (rows x H)
  uint64_t logits_offset = 0, logits_bytes = 0;                // fp32 block (recompute only)
  uint64_t g_offset = 0, g_bytes = 0;                          // G block in the input dtype, ld v_chunk
  uint64_t acc_input_offset = 0, acc_input_bytes = 0;
  uint64_t acc_weight_offset = 0, acc_weight_bytes = 0;
  uint64_t input_copy_offset = 0, input_copy_bytes = 0;
  uint64_t weight_copy_offset = 0, weight_copy_bytes = 0;
  uint64_t workspace_bytes = 0;

  TILEGRAD_API void describe(core::FieldVisitor& v) const;  // as FlceForwardTiling's
};

// The single-process op's plan (a pure function of the shapes, dtype size, layouts, budget and
// Platform):
//   kWhole      the (BT x V) fp32 logits (+ a 16-bit G copy) fit the budget: one chunk, three GEMMs,
//               grad_weight written directly by its GEMM;
//   kChunked    row chunks of chunk_rows (>= kFlceMinChunkRows) whose logits fit the budget next to
//               the fp32 grad_weight accumulator (none for fp32 weights: the output accumulates):
//               three GEMMs per chunk;
//   kVocabOuter otherwise (or when an operand is not oneDNN-ready): forward blocks for the row
//               statistics, then the memory-saving gradient recomputing the logits (four GEMMs).
enum class FlcePlan : int { kWhole = 0, kChunked = 1, kVocabOuter = 2 };
struct FlceFusedTiling : FlceProblem {
  int64_t budget = 0;
  FlcePlan plan = FlcePlan::kVocabOuter;
  int64_t chunk_rows = 0, num_chunks = 0;
  uint64_t logits_offset = 0, logits_bytes = 0;            // fp32 chunk logits (ld V)
  uint64_t g_offset = 0, g_bytes = 0;                      // 16-bit G of a chunk (fp32: aliases logits)
  uint64_t acc_weight_offset = 0, acc_weight_bytes = 0;    // V x H fp32 (16-bit, several chunks)
  FlceForwardTiling fwd;                                   // kVocabOuter
  FlceGradTiling grad;                                     // kVocabOuter
  uint64_t workspace_bytes = 0;
  // plan, gemms (3, or 4 for kVocabOuter), the chunks and buffers of the plan (vocab_outer: the
  // gradient's blocks and loop order): what fused_linear_cross_entropy_plan() returns. Not threads
  // and isa, the Platform's (the trace prints them; the plan depends on neither).
  TILEGRAD_API void describe(core::FieldVisitor& v) const;
};
TILEGRAD_API FlceFusedTiling flce_fused_tiling(const char* op, int64_t bt, int64_t h, int64_t v,
                                               int64_t dtype_size, bool input_gemmable, bool weight_gemmable,
                                               bool grad_input_gemmable, bool grad_weight_gemmable,
                                               int64_t budget_bytes, const core::Platform& platform,
                                               bool grad_weight_wanted = true);
TILEGRAD_API const char* flce_plan_name(FlcePlan p);

// force_order: 0 = pick the smaller workspace, 1 = V-outer, 2 = BT-outer (tests).
TILEGRAD_API FlceGradTiling flce_grad_tiling(const char* op, int64_t bt, int64_t h, int64_t v, int64_t dtype_size,
                                             bool recompute, bool input_gemmable, bool weight_gemmable,
                                             bool grad_input_gemmable, bool grad_weight_gemmable,
                                             int64_t budget_bytes, const core::Platform& platform,
                                             int force_order = 0);

}  // namespace tilegrad::ops
