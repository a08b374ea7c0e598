// aclnnFlashAttentionScore: validation (fa_problem), the forward launch (plan from shapes in the
// tiling, run on addresses here), native C++ API and C ABI.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "aclnnop/aclnn_flash_attention_score.h"
#include "core/acl_tensor.h"
#include "core/workspace.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/gemm.h"
#include "core/tensor.h"
#include "ops/attention/flash_attention_score/fa_blocks.h"
#include "ops/attention/flash_attention_score/fa_c_abi.h"
#include "ops/attention/flash_attention_score/fa_problem.h"
#include "ops/attention/flash_attention_score/flash_attention_score_kernel.h"
#include "ops/attention/flash_attention_score/flash_attention_score_tiling.h"
#include "tilegrad/flash_attention_score.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnFlashAttentionScore";
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kFltMax = std::numeric_limits<float>::max();

FlashAttentionShape shape_of(const fa::Geometry& g, DType dtype) {
  return {g.batch, g.heads, g.kv_heads, g.q_len, g.kv_len, g.head_dim, g.value_dim, dtype == DType::kBFloat16};
}

// The rules that depend on addresses: no output shares memory with an input or another output.
void check_overlaps(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& atten_mask,
                    const TensorView& smax, const TensorView& ssum, const TensorView& out) {
  fa::check_outputs_apart(kOp, {{"softmaxMaxOut", &smax}, {"softmaxSumOut", &ssum}, {"attentionOutOut", &out}},
                          {{"query", &q}, {"key", &k}, {"value", &v}, {"attenMaskOptional", &atten_mask}});
}

fa::Problem validate(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& pse,
                     const TensorView& drop_mask, const TensorView& atten_mask, const FlashAttentionOptions& o,
                     const TensorView& smax, const TensorView& ssum, const TensorView& out) {
  const fa::Geometry g = fa::check_inputs(kOp, q, k, v, o);
  fa::check_stats(kOp, "softmaxMaxOut", smax, g);
  fa::check_stats(kOp, "softmaxSumOut", ssum, g);
  core::require_well_formed(kOp, "attentionOutOut", out);
  core::require_same_dtype(kOp, "attentionOutOut", out, "query", q);
  core::require_shape(kOp, "attentionOutOut", out, fa::layout_shape(g, g.q_len, g.heads, g.value_dim),
                      "query's shape with value's head dim");
  const fa::Problem p = fa::check_problem(kOp, g, pse, drop_mask, atten_mask, o);
  check_overlaps(q, k, v, atten_mask, smax, ssum, out);
  return p;
}

class FlashAttentionLaunch final : public core::Launch {
 public:
  FlashAttentionLaunch(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& pse,
                       const TensorView& drop_mask, const TensorView& atten_mask, const FlashAttentionOptions& o,
                       const TensorView& smax, const TensorView& ssum, const TensorView& out)
      : p_(validate(q, k, v, pse, drop_mask, atten_mask, o, smax, ssum, out)) {
    const fa::Layout l = p_.g.layout;
    q_ = fa::heads_of(q, l, p_.g.heads);
    k_ = fa::heads_of(k, l, p_.g.kv_heads);
    v_ = fa::heads_of(v, l, p_.g.kv_heads);
    out_ = fa::heads_of(out, l, p_.g.heads);
    smax_ = smax;
    ssum_ = ssum;
    tiling_ = flash_attention_score_tiling(shape_of(p_.g, q.dtype), core::Platform::current());
    op_ = fa::operand_dtype(tiling_.shape.bf16_operands);
    kernels_ = flash_attention_kernels(tiling_.isa);
    trace_.record(kOp, {{"query", &q}, {"key", &k}, {"value", &v}, {"attentionOutOut", &out}}, tiling_);
    core::trace_gemm(trace_, q.dtype);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &q = t["query"], &k = t["key"], &v = t["value"], &mask = t["attenMaskOptional"];
    const TensorView &smax = t["softmaxMaxOut"], &ssum = t["softmaxSumOut"], &out = t["attentionOutOut"];
    check_overlaps(q, k, v, mask, smax, ssum, out);
    q_.bind(q.data);
    k_.bind(k.data);
    v_.bind(v.data);
    out_.bind(out.data);
    p_.mask.bind(mask.data);
    t.bind({{"softmaxMaxOut", &smax_}, {"softmaxSumOut", &ssum_}});
  }

  void run(void* workspace) override {
    const FlashAttentionTiling& t = tiling_;
    if (t.tasks == 0) return;
    char* ws = static_cast<char*>(workspace);
    const fa::Geometry& g = p_.g;
    qp_ = ws + t.q_offset;
    kp_ = ws + t.k_offset;
    vp_ = ws + t.v_offset;
    fa::pack_operand(op_, q_, g.batch, g.heads, g.q_len, g.head_dim, g.group, p_.scale, qp_, kernels_, t.threads);
    fa::pack_operand(op_, k_, g.batch, g.kv_heads, g.kv_len, g.head_dim, 1, 1.0f, kp_, kernels_, t.threads);
    fa::pack_operand(op_, v_, g.batch, g.kv_heads, g.kv_len, g.value_dim, 1, 1.0f, vp_, kernels_, t.threads);
    fa::run_tasks(t.tasks, t.threads, ws + t.scratch_offset, t.scratch_bytes_per_thread, true,
                  [&](int64_t task, char* scratch) { run_task(task, scratch); });
  }

 private:
  // One (batch, kv head, query block): the group's heads stacked (fa_blocks.h), online softmax over
  // the visible kv blocks, then the rows out. With bf16 operands S is scaled after its GEMM and P is
  // rounded to bf16 for P V (its row sums stay fp32).
  void run_task(int64_t task, char* scratch) const {
    const FlashAttentionTiling& t = tiling_;
    const fa::Geometry& g = p_.g;
    const FlashAttentionScratch sc = flash_attention_scratch(t);
    const int64_t qb = task % t.q_blocks, kvh = (task / t.q_blocks) % g.kv_heads, b = task / (t.q_blocks * g.kv_heads);
    const int64_t i0 = qb * t.block_q;
    const fa::RowBlock rb{b, kvh * g.group, g.group, i0, std::min(t.block_q, g.q_len - i0)};
    const int64_t rows = rb.rows();
    float* s = reinterpret_cast<float*>(scratch + sc.s);
    float* o = reinterpret_cast<float*>(scratch + sc.acc);
    float* m = reinterpret_cast<float*>(scratch + sc.row_max);
    float* l = reinterpret_cast<float*>(scratch + sc.row_sum);
    int64_t* lo = reinterpret_cast<int64_t*>(scratch + sc.lo);
    int64_t* hi = reinterpret_cast<int64_t*>(scratch + sc.hi);
    const int64_t dv = g.value_dim, d = g.head_dim, ld = t.block_kv;
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);
    std::fill(o, o + rows * dv, 0.0f);
    const bool bf16 = op_ == DType::kBFloat16;
    uint16_t* p16 = reinterpret_cast<uint16_t*>(scratch + sc.p16);
    const int64_t row0 = fa::packed_row(b, rb.head0, i0, g.heads, g.q_len, g.group);
    const char* qrows = fa::element(qp_, op_, row0 * d);
    const char* kh = fa::element(kp_, op_, (b * g.kv_heads + kvh) * g.kv_len * d);
    const char* vh = fa::element(vp_, op_, (b * g.kv_heads + kvh) * g.kv_len * dv);
    const fa::KvRange range = fa::kv_range(p_, i0, rb.positions, t.block_kv);
    for (int64_t c0 = range.begin; c0 < range.end; c0 += t.block_kv) {
      const int64_t cols = std::min(t.block_kv, g.kv_len - c0);
      if (!fa::block_windows(p_, rb, c0, cols, lo, hi)) continue;
      fa::gemm_abt(op_, qrows, d, fa::element(kh, op_, c0 * d), d, s, ld, rows, cols, d);
      if (bf16) fa::scale_block(s, ld, rows, cols, p_.scale);
      fa::apply_mask(p_, rb, c0, lo, hi, s, ld);
      kernels_.online_softmax(s, ld, rows, cols, lo, hi, m, l, o, dv, dv);
      if (bf16) fa::round_block_bf16(s, ld, rows, cols, p16, kernels_);
      const void* p = bf16 ? static_cast<const void*>(p16) : s;
      fa::gemm_ab_add(op_, p, ld, fa::element(vh, op_, c0 * dv), dv, o, dv, rows, dv, cols);
    }
    finish_rows(rb, o, m, l);
  }

  // out = acc / sum; a row that kept nothing gets out = 0, max = -FLT_MAX, sum = +FLT_MAX (the vendor's
  // values with innerPrecise = 2). m becomes the per-row output factor.
  void finish_rows(const fa::RowBlock& rb, const float* o, float* m, float* l) const {
    const int64_t sms = smax_.strides[3], sss = ssum_.strides[3];
    for (int64_t r = 0; r < rb.rows(); ++r) {
      const bool empty = m[r] == kNegInf;
      const float mx = empty ? -kFltMax : m[r], sm = empty ? kFltMax : l[r];
      const int64_t n = rb.head(r), i = rb.position(r);
      float* pm = static_cast<float*>(smax_.data) + rb.b * smax_.strides[0] + n * smax_.strides[1] + i * smax_.strides[2];
      float* ps = static_cast<float*>(ssum_.data) + rb.b * ssum_.strides[0] + n * ssum_.strides[1] + i * ssum_.strides[2];
      for (int lane = 0; lane < 8; ++lane) {
        std::memcpy(pm + lane * sms, &mx, 4);
        std::memcpy(ps + lane * sss, &sm, 4);
      }
      m[r] = empty ? 0.0f : 1.0f / l[r];
    }
    fa::store_rows(out_, rb, p_.g.value_dim, o, p_.g.value_dim, m, 1.0f, kernels_);
  }

  fa::Problem p_;
  fa::Heads q_, k_, v_, out_;
  TensorView smax_, ssum_;
  FlashAttentionTiling tiling_;
  FlashAttentionKernels kernels_{};
  DType op_ = DType::kFloat32;  // the packed operands' dtype
  char *qp_ = nullptr, *kp_ = nullptr, *vp_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

FlashAttentionScoreOutputSpecs flash_attention_score_output_specs(const TensorView& q, const TensorView& k,
                                                                  const TensorView& v,
                                                                  const FlashAttentionOptions& options) {
  const ops::fa::Geometry g = ops::fa::check_inputs(ops::kOp, q, k, v, options);
  const OutputSpec stats{DType::kFloat32, {g.batch, g.heads, g.q_len, 8}};
  return {stats, stats, {q.dtype, ops::fa::layout_shape(g, g.q_len, g.heads, g.value_dim)}};
}

void flash_attention_score(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& pse,
                           const TensorView& drop_mask, const TensorView& atten_mask,
                           const FlashAttentionOptions& options, const TensorView& softmax_max,
                           const TensorView& softmax_sum, const TensorView& attention_out) {
  ops::FlashAttentionLaunch launch(q, k, v, pse, drop_mask, atten_mask, options, softmax_max, softmax_sum,
                                   attention_out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;
namespace fa = tilegrad::ops::fa;

extern "C" aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor* softmaxMaxOut,
    const aclTensor* softmaxSumOut, const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  (void)prefixOptional;  // only the prefix modes 5 / 6 read it, and they are refused
  using fa::Need;
  const std::vector<fa::CAbiTensor> params = {
      {"query", query, false, Need::kRequired},
      {"key", key, false, Need::kRequired},
      {"value", value, false, Need::kRequired},
      {"realShiftOptional", realShiftOptional, false, Need::kOptional},
      {"dropMaskOptional", dropMaskOptional, false, Need::kOptional},
      {"paddingMaskOptional", paddingMaskOptional, false, Need::kReserved},
      {"attenMaskOptional", attenMaskOptional, false, Need::kOptional},
      {"softmaxMaxOut", softmaxMaxOut, true, Need::kRequired},
      {"softmaxSumOut", softmaxSumOut, true, Need::kRequired},
      {"softmaxOutOut", softmaxOutOut, true, Need::kReserved},  // never written
      {"attentionOutOut", attentionOutOut, true, Need::kRequired}};
  const fa::CAbiScalars scalars{scaleValue, keepProb,     preTokens,    nextTokens,
                                headNum,    inputLayout, innerPrecise, sparseMode};
  return fa::create_c_abi_executor(ops::kOp, params, scalars, workspaceSize, executor, [](const fa::CAbiArgs& a) {
    return std::make_unique<ops::FlashAttentionLaunch>(a["query"], a["key"], a["value"], a["realShiftOptional"],
                                                       a["dropMaskOptional"], a["attenMaskOptional"], a.options,
                                                       a["softmaxMaxOut"], a["softmaxSumOut"], a["attentionOutOut"]);
  });
}

extern "C" aclnnStatus aclnnFlashAttentionScore(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                const aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
