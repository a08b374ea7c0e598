// aclnnFlashAttentionScoreGrad: validation, the one-pass grad launch (per (batch, kv head, kv group):
// each kv block's dK and dV over the query blocks, the group's query heads stacked in each, and dQ's
// contributions into the group's fp32 slab; then the slabs summed into dQ), native C++ API and C ABI.
// P = exp(S - max) / sum is recomputed once per (query block, kv block) from the forward's
// statistics; every accumulation is fp32 in a fixed block order and each gradient is rounded once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "aclnnop/aclnn_flash_attention_score_grad.h"
#include "core/acl_tensor.h"
#include "core/workspace.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/attention/flash_attention_score/fa_blocks.h"
#include "ops/attention/flash_attention_score/fa_c_abi.h"
#include "ops/attention/flash_attention_score/fa_problem.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.h"
#include "ops/attention/flash_attention_score/flash_attention_score_tiling.h"
#include "tilegrad/flash_attention_score.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFlashAttentionScoreGrad";

struct GradTensors {
  const TensorView &q, &k, &v, &dy, &smax, &ssum, &attn_in, &mask, &dq, &dk, &dv;
};

// The rules that depend on addresses: no gradient shares memory with an input or another gradient.
void check_overlaps(const GradTensors& t) {
  fa::check_outputs_apart(kOp, {{"dqOut", &t.dq}, {"dkOut", &t.dk}, {"dvOut", &t.dv}},
                          {{"query", &t.q}, {"keyIn", &t.k}, {"value", &t.v}, {"dy", &t.dy},
                           {"softmaxMaxOptional", &t.smax}, {"softmaxSumOptional", &t.ssum},
                           {"attentionInOptional", &t.attn_in}, {"attenMaskOptional", &t.mask}});
}

fa::Problem validate(const GradTensors& t, const TensorView& pse, const TensorView& drop_mask,
                     const FlashAttentionOptions& o) {
  const fa::Geometry g = fa::check_inputs(kOp, t.q, t.k, t.v, o);
  const std::vector<int64_t> out_shape = fa::layout_shape(g, g.q_len, g.heads, g.value_dim);
  core::require_well_formed(kOp, "dy", t.dy);
  core::require_same_dtype(kOp, "dy", t.dy, "query", t.q);
  core::require_shape(kOp, "dy", t.dy, out_shape, "the forward output's shape");
  core::require_well_formed(kOp, "attentionInOptional", t.attn_in);
  core::require_same_dtype(kOp, "attentionInOptional", t.attn_in, "query", t.q);
  core::require_shape(kOp, "attentionInOptional", t.attn_in, out_shape, "the forward output's shape");
  fa::check_stats(kOp, "softmaxMaxOptional", t.smax, g);
  fa::check_stats(kOp, "softmaxSumOptional", t.ssum, g);
  const std::pair<const char*, const TensorView*> outs[] = {{"dqOut", &t.dq}, {"dkOut", &t.dk}, {"dvOut", &t.dv}};
  const TensorView* like[] = {&t.q, &t.k, &t.v};
  const char* like_names[] = {"query", "keyIn", "value"};
  for (int i = 0; i < 3; ++i) {
    core::require_well_formed(kOp, outs[i].first, *outs[i].second);
    core::require_same_dtype(kOp, outs[i].first, *outs[i].second, "query", t.q);
    core::require_shape(kOp, outs[i].first, *outs[i].second, like[i]->shape, like_names[i]);
  }
  const fa::Problem p = fa::check_problem(kOp, g, pse, drop_mask, t.mask, o);
  check_overlaps(t);
  return p;
}

class FlashAttentionGradLaunch final : public core::Launch {
 public:
  FlashAttentionGradLaunch(const GradTensors& t, const TensorView& pse, const TensorView& drop_mask,
                           const FlashAttentionOptions& o)
      : p_(validate(t, pse, drop_mask, o)) {
    const fa::Geometry& g = p_.g;
    const fa::Layout l = g.layout;
    q_ = fa::heads_of(t.q, l, g.heads);
    k_ = fa::heads_of(t.k, l, g.kv_heads);
    v_ = fa::heads_of(t.v, l, g.kv_heads);
    dy_ = fa::heads_of(t.dy, l, g.heads);
    attn_in_ = fa::heads_of(t.attn_in, l, g.heads);
    dq_ = fa::heads_of(t.dq, l, g.heads);
    dk_ = fa::heads_of(t.dk, l, g.kv_heads);
    dv_ = fa::heads_of(t.dv, l, g.kv_heads);
    smax_ = t.smax;
    ssum_ = t.ssum;
    tiling_ = flash_attention_score_grad_tiling({g.batch, g.heads, g.kv_heads, g.q_len, g.kv_len, g.head_dim,
                                                 g.value_dim, t.q.dtype == DType::kBFloat16},
                                                core::Platform::current());
    op_ = fa::operand_dtype(tiling_.shape.bf16_operands);
    kernels_ = flash_attention_kernels(tiling_.isa);
    trace_.record(kOp, {{"query", &t.q}, {"keyIn", &t.k}, {"value", &t.v}, {"dy", &t.dy}}, tiling_);
    core::trace_gemm(trace_, t.q.dtype);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& operands) override {
    const auto& o = operands;
    const GradTensors t{o["query"], o["keyIn"], o["value"], o["dy"], o["softmaxMaxOptional"], o["softmaxSumOptional"],
                        o["attentionInOptional"], o["attenMaskOptional"], o["dqOut"], o["dkOut"], o["dvOut"]};
    check_overlaps(t);
    q_.bind(t.q.data);
    k_.bind(t.k.data);
    v_.bind(t.v.data);
    dy_.bind(t.dy.data);
    attn_in_.bind(t.attn_in.data);
    dq_.bind(t.dq.data);
    dk_.bind(t.dk.data);
    dv_.bind(t.dv.data);
    p_.mask.bind(t.mask.data);
    operands.bind({{"softmaxMaxOptional", &smax_}, {"softmaxSumOptional", &ssum_}});
  }

  void run(void* workspace) override {
    const FlashAttentionTiling& t = tiling_;
    if (t.workspace_bytes == 0) return;
    const fa::Geometry& g = p_.g;
    char* ws = static_cast<char*>(workspace);
    qp_ = ws + t.q_offset;
    kp_ = ws + t.k_offset;
    vp_ = ws + t.v_offset;
    dyp_ = ws + t.dy_offset;
    const int64_t rows = g.batch * g.heads * g.q_len;
    row_max_ = reinterpret_cast<float*>(ws + t.stats_offset);
    inv_sum_ = row_max_ + rows;
    rowdot_ = inv_sum_ + rows;
    dq_slabs_ = ws + t.dq_offset;
    written_ = reinterpret_cast<uint8_t*>(ws + t.written_offset);
    fa::pack_operand(op_, q_, g.batch, g.heads, g.q_len, g.head_dim, g.group, p_.scale, qp_, kernels_, t.threads);
    fa::pack_operand(op_, k_, g.batch, g.kv_heads, g.kv_len, g.head_dim, 1, 1.0f, kp_, kernels_, t.threads);
    fa::pack_operand(op_, v_, g.batch, g.kv_heads, g.kv_len, g.value_dim, 1, 1.0f, vp_, kernels_, t.threads);
    fa::pack_operand(op_, dy_, g.batch, g.heads, g.q_len, g.value_dim, g.group, 1.0f, dyp_, kernels_, t.threads);
    core::parallel_for(rows, t.threads, [&](int64_t row) { row_stats(row); });
    // Group 0's tasks come first: under a causal mask its kv blocks (0, kv_groups, ...) are each the
    // earliest of their round, seen by the most query blocks.
    fa::run_tasks(t.grad_tasks, t.threads, ws + t.scratch_offset, t.scratch_bytes_per_thread, false,
                  [&](int64_t task, char* mine) { group_task(task, mine); });
    core::parallel_for(g.batch * g.kv_heads * t.grad_q_blocks, t.threads, [&](int64_t unit) { store_dq(unit); });
  }

 private:
  // max, 1 / sum (lane 0 of the forward's statistics) and rowdot = sum_d dy * out (fp32, in order),
  // of packed (stacked) row `row`.
  void row_stats(int64_t row) {
    const fa::Geometry& g = p_.g;
    const int64_t gi = row % g.group, i = (row / g.group) % g.q_len;
    const int64_t n = (row / (g.group * g.q_len)) % g.kv_heads * g.group + gi, b = row / (g.group * g.q_len * g.kv_heads);
    const auto lane0 = [&](const TensorView& t) {
      float v;
      std::memcpy(&v, static_cast<const float*>(t.data) + b * t.strides[0] + n * t.strides[1] + i * t.strides[2], 4);
      return v;
    };
    row_max_[row] = lane0(smax_);
    inv_sum_[row] = 1.0f / lane0(ssum_);
    // dy from the caller's tensor (exact in fp32 whatever the packed operands' dtype).
    const char* dy = dy_.row(b, n, i);
    const char* o = attn_in_.row(b, n, i);
    const int64_t es = dtype_size(attn_in_.dtype), dys = dtype_size(dy_.dtype);
    float acc = 0.0f;
    for (int64_t d = 0; d < g.value_dim; ++d)
      acc += static_cast<float>(core::load_float_element(dy_.dtype, dy + d * dy_.sd * dys)) *
             static_cast<float>(core::load_float_element(attn_in_.dtype, o + d * attn_in_.sd * es));
    rowdot_[row] = acc;
  }

  // One thread's block buffers; p and ds are P and dS as GEMM operands: s and dp themselves (fp32
  // operands) or their bf16 roundings.
  struct Block {
    float *s, *dp, *acc, *acc2;
    int64_t *lo, *hi;
    void *p, *ds;
  };
  Block block_of(char* scratch) const {
    const FlashAttentionScratch sc = flash_attention_scratch(tiling_);
    const bool bf16 = op_ == DType::kBFloat16;
    float* s = reinterpret_cast<float*>(scratch + sc.s);
    float* dp = reinterpret_cast<float*>(scratch + sc.dp);
    return {s, dp, reinterpret_cast<float*>(scratch + sc.acc), reinterpret_cast<float*>(scratch + sc.acc2),
            reinterpret_cast<int64_t*>(scratch + sc.lo), reinterpret_cast<int64_t*>(scratch + sc.hi),
            bf16 ? static_cast<void*>(scratch + sc.p16) : s, bf16 ? static_cast<void*>(scratch + sc.ds16) : dp};
  }

  // P and dS of the block's rows against kv columns [c0, c0 + cols) into blk.s and blk.dp (leading
  // dim ld); false if no row keeps a column there.
  bool probabilities_and_ds(const Block& blk, int64_t ld, const fa::RowBlock& rb, int64_t c0, int64_t cols) const {
    const fa::Geometry& g = p_.g;
    if (!fa::block_windows(p_, rb, c0, cols, blk.lo, blk.hi)) return false;
    const int64_t d = g.head_dim, dv = g.value_dim, kvh = rb.head0 / g.group, rows = rb.rows();
    const int64_t row0 = packed_row0(rb);
    const char* kb = fa::element(kp_, op_, ((rb.b * g.kv_heads + kvh) * g.kv_len + c0) * d);
    const char* vb = fa::element(vp_, op_, ((rb.b * g.kv_heads + kvh) * g.kv_len + c0) * dv);
    fa::gemm_abt(op_, fa::element(qp_, op_, row0 * d), d, kb, d, blk.s, ld, rows, cols, d);
    const bool bf16 = op_ == DType::kBFloat16;
    if (bf16) fa::scale_block(blk.s, ld, rows, cols, p_.scale);
    fa::apply_mask(p_, rb, c0, blk.lo, blk.hi, blk.s, ld);
    fa::gemm_abt(op_, fa::element(dyp_, op_, row0 * dv), dv, vb, dv, blk.dp, ld, rows, cols, dv);
    kernels_.softmax_grad(blk.s, blk.dp, ld, rows, cols, blk.lo, blk.hi, row_max_ + row0, inv_sum_ + row0,
                          rowdot_ + row0);
    if (bf16) {
      fa::round_block_bf16(blk.s, ld, rows, cols, static_cast<uint16_t*>(blk.p), kernels_);
      fa::round_block_bf16(blk.dp, ld, rows, cols, static_cast<uint16_t*>(blk.ds), kernels_);
    }
    return true;
  }

  // The packed (stacked) row of the block's first row: its rows follow densely.
  int64_t packed_row0(const fa::RowBlock& rb) const {
    return fa::packed_row(rb.b, rb.head0, rb.i0, p_.g.heads, p_.g.q_len, p_.g.group);
  }

  // The stacked query block of kv head kvh at positions [i0, i0 + positions) (clipped to Sq).
  fa::RowBlock query_block(int64_t b, int64_t kvh, int64_t i0, int64_t positions) const {
    return {b, kvh * p_.g.group, p_.g.group, i0, std::min(positions, p_.g.q_len - i0)};
  }

  // One task's dQ slab: row r of its (batch, kv head)'s stacked rows at dq + r * D; written[qb] set
  // once the group has written query block qb's rows.
  struct Slab {
    float* dq;
    uint8_t* written;
  };
  Slab slab_of(int64_t pair, int64_t group) const {
    const int64_t index = pair * tiling_.kv_groups + group;
    return {reinterpret_cast<float*>(dq_slabs_ + index * tiling_.dq_slab_bytes),
            written_ + index * tiling_.grad_q_blocks};
  }

  // One (batch, kv head, kv group): the group's kv blocks (kv_groups apart) in order. Task order:
  // group-major, so every (batch, kv head)'s group 0 comes first.
  void group_task(int64_t task, char* scratch) const {
    const FlashAttentionTiling& t = tiling_;
    const int64_t pairs = p_.g.batch * p_.g.kv_heads;
    const int64_t pair = task % pairs, group = task / pairs;
    const Slab slab = slab_of(pair, group);
    std::fill(slab.written, slab.written + t.grad_q_blocks, uint8_t{0});
    const Block blk = block_of(scratch);
    for (int64_t kb = group; kb < t.grad_kv_blocks; kb += t.kv_groups) kv_block(pair, kb, blk, slab);
  }

  // dK, dV of kv block kb of (batch, kv head) `pair`, summed over the query blocks in order; each
  // block stacks the group's heads, so their sum runs inside one GEMM. dK = scale dS^T Q, dV = P^T dY;
  // the query block's dQ contribution dS K goes into the slab (its first one written, later ones
  // added: the slab holds this group's partial sum of dQ).
  void kv_block(int64_t pair, int64_t kb, const Block& blk, const Slab& slab) const {
    const FlashAttentionTiling& t = tiling_;
    const fa::Geometry& g = p_.g;
    const int64_t b = pair / g.kv_heads, kvh = pair % g.kv_heads;
    const int64_t c0 = kb * t.grad_block_kv, cols = std::min(t.grad_block_kv, g.kv_len - c0);
    const int64_t d = g.head_dim, dv = g.value_dim, ld = t.grad_block_kv;
    const char* kblock = fa::element(kp_, op_, (pair * g.kv_len + c0) * d);
    std::fill(blk.acc, blk.acc + cols * d, 0.0f);
    std::fill(blk.acc2, blk.acc2 + cols * dv, 0.0f);
    for (int64_t qb = 0; qb < t.grad_q_blocks; ++qb) {
      const fa::RowBlock rb = query_block(b, kvh, qb * t.grad_block_q, t.grad_block_q);
      const fa::KvRange range = fa::kv_range(p_, rb.i0, rb.positions, 1);
      if (range.end <= c0 || range.begin >= c0 + cols) continue;
      if (!probabilities_and_ds(blk, ld, rb, c0, cols)) continue;
      const int64_t row0 = packed_row0(rb), rows = rb.rows();
      fa::gemm_atb_add(op_, blk.p, ld, fa::element(dyp_, op_, row0 * dv), dv, blk.acc2, dv, cols, dv, rows);
      fa::gemm_atb_add(op_, blk.ds, ld, fa::element(qp_, op_, row0 * d), d, blk.acc, d, cols, d, rows);
      fa::gemm_ab(op_, blk.ds, ld, kblock, d, slab.dq + rb.i0 * g.group * d, d, rows, d, cols, slab.written[qb] != 0);
      slab.written[qb] = 1;
    }
    // fp32 operands: q was packed pre-scaled; bf16 operands: the scale comes here.
    const float dk_scale = op_ == DType::kBFloat16 ? p_.scale : 1.0f;
    const fa::RowBlock kv_rows{b, kvh, 1, c0, cols};
    fa::store_rows(dk_, kv_rows, d, blk.acc, d, nullptr, dk_scale, kernels_);
    fa::store_rows(dv_, kv_rows, dv, blk.acc2, dv, nullptr, 1.0f, kernels_);
  }

  // dQ of one (batch, kv head, query block) = scale * the sum of the slabs that wrote it, added in
  // group order into the first of them (none: 0), rounded once.
  void store_dq(int64_t unit) const {
    const FlashAttentionTiling& t = tiling_;
    const fa::Geometry& g = p_.g;
    const int64_t qb = unit % t.grad_q_blocks, pair = unit / t.grad_q_blocks;
    const fa::RowBlock rb = query_block(pair / g.kv_heads, pair % g.kv_heads, qb * t.grad_block_q, t.grad_block_q);
    const int64_t d = g.head_dim, first = rb.i0 * g.group * d, n = rb.rows() * d;
    float* sum = nullptr;
    for (int64_t group = 0; group < t.kv_groups; ++group) {
      const Slab slab = slab_of(pair, group);
      if (!slab.written[qb]) continue;
      float* part = slab.dq + first;
      if (sum == nullptr) {
        sum = part;
      } else {
        for (int64_t e = 0; e < n; ++e) sum[e] += part[e];
      }
    }
    if (sum == nullptr) {
      sum = slab_of(pair, 0).dq + first;
      std::fill(sum, sum + n, 0.0f);
    }
    fa::store_rows(dq_, rb, d, sum, d, nullptr, p_.scale, kernels_);
  }

  fa::Problem p_;
  fa::Heads q_, k_, v_, dy_, attn_in_, dq_, dk_, dv_;
  TensorView smax_, ssum_;
  FlashAttentionTiling tiling_;
  FlashAttentionKernels kernels_{};
  DType op_ = DType::kFloat32;  // the packed operands' dtype
  char *qp_ = nullptr, *kp_ = nullptr, *vp_ = nullptr, *dyp_ = nullptr;
  float *row_max_ = nullptr, *inv_sum_ = nullptr, *rowdot_ = nullptr;
  char* dq_slabs_ = nullptr;
  uint8_t* written_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

FlashAttentionScoreGradOutputSpecs flash_attention_score_grad_output_specs(const TensorView& q, const TensorView& k,
                                                                           const TensorView& v) {
  return {{q.dtype, q.shape}, {k.dtype, k.shape}, {v.dtype, v.shape}};
}

void flash_attention_score_grad(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& dy,
                                const TensorView& pse, const TensorView& drop_mask, const TensorView& atten_mask,
                                const TensorView& softmax_max, const TensorView& softmax_sum,
                                const TensorView& attention_in, const FlashAttentionOptions& options,
                                const TensorView& dq, const TensorView& dk, const TensorView& dv) {
  const ops::GradTensors t{q, k, v, dy, softmax_max, softmax_sum, attention_in, atten_mask, dq, dk, dv};
  ops::FlashAttentionGradLaunch launch(t, pse, drop_mask, options);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;
namespace fa = tilegrad::ops::fa;

extern "C" aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* keyIn, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut,
    const aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  (void)prefixOptional;  // only the prefix modes 5 / 6 read it, and they are refused
  using fa::Need;
  // The vendor reads softmaxMax / softmaxSum / attentionIn despite "Optional": they are required.
  const std::vector<fa::CAbiTensor> params = {
      {"query", query, false, Need::kRequired},
      {"keyIn", keyIn, false, Need::kRequired},
      {"value", value, false, Need::kRequired},
      {"dy", dy, false, Need::kRequired},
      {"pseShiftOptional", pseShiftOptional, false, Need::kOptional},
      {"dropMaskOptional", dropMaskOptional, false, Need::kOptional},
      {"paddingMaskOptional", paddingMaskOptional, false, Need::kReserved},
      {"attenMaskOptional", attenMaskOptional, false, Need::kOptional},
      {"softmaxMaxOptional", softmaxMaxOptional, false, Need::kRequired},
      {"softmaxSumOptional", softmaxSumOptional, false, Need::kRequired},
      {"softmaxInOptional", softmaxInOptional, false, Need::kReserved},
      {"attentionInOptional", attentionInOptional, false, Need::kRequired},
      {"dqOut", dqOut, true, Need::kRequired},
      {"dkOut", dkOut, true, Need::kRequired},
      {"dvOut", dvOut, true, Need::kRequired},
      {"dpseOut", dpseOut, true, Need::kReserved}};  // pse is refused, so dpse is never written
  const fa::CAbiScalars scalars{scaleValue, keepProb,     preTokens,    nextTokens,
                                headNum,    inputLayout, innerPrecise, sparseMode};
  return fa::create_c_abi_executor(ops::kOp, params, scalars, workspaceSize, executor, [](const fa::CAbiArgs& a) {
    const ops::GradTensors t{a["query"],         a["keyIn"],          a["value"],
                             a["dy"],            a["softmaxMaxOptional"], a["softmaxSumOptional"],
                             a["attentionInOptional"], a["attenMaskOptional"], a["dqOut"],
                             a["dkOut"],         a["dvOut"]};
    return std::make_unique<ops::FlashAttentionGradLaunch>(t, a["pseShiftOptional"], a["dropMaskOptional"], a.options);
  });
}

extern "C" aclnnStatus aclnnFlashAttentionScoreGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                    const aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
