#include "ops/attention/flash_attention_score/fa_problem.h"

#include <algorithm>
#include <vector>

#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tilegrad::ops::fa {
namespace {

constexpr int64_t kMaxHeadDim = 768;          // the vendor's code limit (its V2 document says 512)
constexpr int64_t kMaskTemplate = 2048;       // modes 2, 3, 4 take the compressed 2048 x 2048 causal template
constexpr int64_t kUnbounded = int64_t(1) << 50;  // a band edge beyond every sequence

Layout parse_layout(const char* op, const std::string& s) {
  if (s == "BSH") return Layout::kBSH;
  if (s == "SBH") return Layout::kSBH;
  if (s == "BSND") return Layout::kBSND;
  if (s == "BNSD") return Layout::kBNSD;
  if (s == "TND")
    core::fail(Status::kParamInvalid, op, ": inputLayout TND is only for the varlen API "
               "(aclnnFlashAttentionVarLenScore), use BSH, SBH, BSND or BNSD, got \"", s, "\"");
  core::fail(Status::kParamInvalid, op, ": inputLayout must be BSH, SBH, BSND or BNSD, got \"", s, "\"");
}

bool three_dim(Layout l) { return l == Layout::kBSH || l == Layout::kSBH; }

// (batch, seq) of a tensor of the layout.
int64_t batch_of(const TensorView& t, Layout l) { return l == Layout::kSBH ? t.shape[1] : t.shape[0]; }
int64_t seq_of(const TensorView& t, Layout l) {
  switch (l) {
    case Layout::kSBH: return t.shape[0];
    case Layout::kBNSD: return t.shape[2];
    default: return t.shape[1];
  }
}
// Heads of a 4-D layout.
int64_t heads_dim(const TensorView& t, Layout l) { return l == Layout::kBNSD ? t.shape[1] : t.shape[2]; }

// n heads of dim d in a tensor whose last axis is hidden (3-D layouts) or d (4-D).
int64_t head_dim_of(const char* op, const char* arg, const TensorView& t, Layout l, int64_t n) {
  const int64_t last = t.shape.back();
  if (!three_dim(l)) return last;
  core::check(n > 0 && last % n == 0, op, ": ", arg, " hidden size ", last, " must be a multiple of its head count ",
              n, ", got shape ", shape_str(t.shape));
  return last / n;
}

}  // namespace

FlashAttentionOptions c_abi_options(const char* op, double scale_value, double keep_prob, int64_t pre_tokens,
                                    int64_t next_tokens, int64_t head_num, const char* input_layout,
                                    int64_t inner_precise, int64_t sparse_mode) {
  core::require_not_null(op, "inputLayout", input_layout);
  return {scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout, inner_precise, sparse_mode};
}

Geometry check_inputs(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                      const FlashAttentionOptions& o) {
  core::require_well_formed(op, "query", q);
  core::require_well_formed(op, "key", k);
  core::require_well_formed(op, "value", v);
  core::require_dtype(op, "query", q, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  core::require_same_dtype(op, "key", k, "query", q);
  core::require_same_dtype(op, "value", v, "query", q);
  Geometry g;
  g.layout = parse_layout(op, o.input_layout);
  const int rank = three_dim(g.layout) ? 3 : 4;
  core::require_rank(op, "query", q, rank, rank);
  core::require_rank(op, "key", k, rank, rank);
  core::require_rank(op, "value", v, rank, rank);
  core::check(o.head_num > 0, op, ": headNum must be > 0, got ", o.head_num);
  g.heads = o.head_num;
  g.batch = batch_of(q, g.layout);
  g.q_len = seq_of(q, g.layout);
  g.kv_len = seq_of(k, g.layout);
  core::check(batch_of(k, g.layout) == g.batch && batch_of(v, g.layout) == g.batch, op,
              ": query, key and value must have one batch size, got shapes ", shape_str(q.shape), ", ",
              shape_str(k.shape), ", ", shape_str(v.shape));
  core::check(seq_of(v, g.layout) == g.kv_len, op, ": key and value must have one sequence length, got shapes ",
              shape_str(k.shape), ", ", shape_str(v.shape));
  if (!three_dim(g.layout))
    core::check(heads_dim(q, g.layout) == g.heads, op, ": query's head axis must equal headNum ", g.heads,
                ", got shape ", shape_str(q.shape), " (layout ", o.input_layout, ")");
  g.head_dim = head_dim_of(op, "query", q, g.layout, g.heads);
  core::check(g.head_dim >= 1 && g.head_dim <= kMaxHeadDim, op, ": head dim D must be in [1, ", kMaxHeadDim,
              "], got ", g.head_dim, " (query shape ", shape_str(q.shape), ", headNum ", g.heads, ")");
  if (three_dim(g.layout)) {
    g.kv_heads = head_dim_of(op, "key", k, g.layout, 1) / g.head_dim;
    core::check(k.shape[2] % g.head_dim == 0 && g.kv_heads >= 1, op, ": key hidden size ", k.shape[2],
                " must be a non-zero multiple of the head dim ", g.head_dim, ", got shape ", shape_str(k.shape));
  } else {
    g.kv_heads = heads_dim(k, g.layout);
    core::check(k.shape.back() == g.head_dim, op, ": key head dim must equal query's ", g.head_dim,
                ", got shape ", shape_str(k.shape));
    core::check(heads_dim(v, g.layout) == g.kv_heads, op, ": value must have key's ", g.kv_heads,
                " heads, got shape ", shape_str(v.shape));
  }
  core::check(g.kv_heads >= 1 && g.heads % g.kv_heads == 0, op, ": query heads ", g.heads,
              " must be a multiple of key/value heads, got ", g.kv_heads);
  g.group = g.heads / g.kv_heads;
  g.value_dim = head_dim_of(op, "value", v, g.layout, g.kv_heads);
  core::check(g.value_dim >= 1 && g.value_dim <= g.head_dim, op, ": value head dim must be in [1, ", g.head_dim,
              "] (query's head dim), got ", g.value_dim, " (value shape ", shape_str(v.shape), ")");
  return g;
}

namespace {

bool is_template_shape(const std::vector<int64_t>& s) {
  const std::vector<int64_t> t2{kMaskTemplate, kMaskTemplate}, t4{1, 1, kMaskTemplate, kMaskTemplate};
  return s == t2 || s == t4;
}

ExplicitMask explicit_mask(const char* op, const TensorView& m, const Geometry& g) {
  const int64_t b = g.batch, n = g.heads, sq = g.q_len, skv = g.kv_len;
  const std::vector<std::vector<int64_t>> allowed{{b, n, sq, skv}, {b, 1, sq, skv}, {1, 1, sq, skv}, {sq, skv}};
  const bool ok = std::find(allowed.begin(), allowed.end(), m.shape) != allowed.end();
  core::check(ok, op, ": attenMaskOptional shape must be [B,N1,Sq,Skv], [B,1,Sq,Skv], [1,1,Sq,Skv] or [Sq,Skv] = ",
              shape_str(allowed[0]), ", ", shape_str(allowed[1]), ", ", shape_str(allowed[2]), " or ",
              shape_str(allowed[3]), ", got ", shape_str(m.shape));
  ExplicitMask e;
  e.data = static_cast<const uint8_t*>(m.data);
  const int r = m.rank();
  e.si = m.strides[r - 2];
  e.sj = m.strides[r - 1];
  if (r == 4) {
    e.sb = m.shape[0] == 1 ? 0 : m.strides[0];
    e.sn = m.shape[1] == 1 ? 0 : m.strides[1];
  }
  return e;
}

int64_t clamp_tokens(int64_t t) { return std::max(-kUnbounded, std::min(kUnbounded, t)); }

}  // namespace

Problem check_problem(const char* op, const Geometry& g, const TensorView& pse, const TensorView& drop_mask,
                      const TensorView& atten_mask, const FlashAttentionOptions& o) {
  Problem p;
  p.g = g;
  p.scale = static_cast<float>(o.scale_value);
  core::check(!core::present(pse), op, ": realShiftOptional / pseShiftOptional (pse) is not supported by tilegrad; "
              "pass null (add a float mask to the scores another way), got shape ", shape_str(pse.shape));
  core::check(o.keep_prob > 0.0 && o.keep_prob <= 1.0, op, ": keepProb must be in (0, 1], got ", o.keep_prob);
  if (o.keep_prob < 1.0) {
    core::check(core::present(drop_mask), op, ": keepProb ", o.keep_prob,
                " < 1 needs dropMaskOptional (the bit-packed keep mask); pass keepProb = 1 for no dropout");
    core::fail(Status::kParamInvalid, op, ": dropout (keepProb ", o.keep_prob,
               " < 1 with dropMaskOptional) is not supported by tilegrad yet; pass keepProb = 1");
  }
  const int64_t mode = o.sparse_mode;
  core::check(mode != 5 && mode != 6, op, ": sparseMode ", mode, " (prefix) is not supported by tilegrad; use 0 to 4");
  core::check(mode != 7 && mode != 8, op, ": sparseMode ", mode,
              " is only for the varlen API (layout TND); use 0 to 4");
  core::check(mode >= 0 && mode <= 4, op, ": sparseMode must be in [0, 8] (tilegrad supports 0 to 4), got ", mode);
  p.window = {-kUnbounded, kUnbounded};
  // The vendor computes everything when there is no mask, whatever the mode (its sparse setup returns early).
  if (!core::present(atten_mask)) return p;
  core::require_well_formed(op, "attenMaskOptional", atten_mask);
  core::require_dtype(op, "attenMaskOptional", atten_mask, {DType::kBool, DType::kUInt8});
  const int64_t pre = clamp_tokens(o.pre_tokens), next = clamp_tokens(o.next_tokens);
  const int64_t delta = g.kv_len - g.q_len;
  if (mode <= 1) {
    p.mask = explicit_mask(op, atten_mask, g);
  } else {
    core::check(is_template_shape(atten_mask.shape), op, ": sparseMode ", mode,
                " needs the compressed causal attenMaskOptional of shape [2048,2048], got ",
                shape_str(atten_mask.shape));
  }
  if (mode == 0 || mode == 4)
    core::check(pre + next >= 0, op, ": preTokens and nextTokens must leave a non-empty band (preTokens + nextTokens "
                ">= 0), got preTokens ", o.pre_tokens, ", nextTokens ", o.next_tokens);
  switch (mode) {
    case 0: p.window = {-pre, next}; break;
    case 2: p.window = {-kUnbounded, 0}; break;
    case 3: p.window = {-kUnbounded, delta}; break;
    case 4: p.window = {delta - pre, delta + next}; break;
    default: break;
  }
  return p;
}

Heads heads_of(const TensorView& t, Layout layout, int64_t n) {
  Heads h;
  h.data = static_cast<char*>(t.data);
  h.dtype = t.dtype;
  const auto& s = t.strides;
  switch (layout) {
    case Layout::kBSH: {
      const int64_t d = t.shape[2] / n;
      h = {h.data, h.dtype, s[0], s[2] * d, s[1], s[2]};
      break;
    }
    case Layout::kSBH: {
      const int64_t d = t.shape[2] / n;
      h = {h.data, h.dtype, s[1], s[2] * d, s[0], s[2]};
      break;
    }
    case Layout::kBSND: h = {h.data, h.dtype, s[0], s[2], s[1], s[3]}; break;
    case Layout::kBNSD: h = {h.data, h.dtype, s[0], s[1], s[2], s[3]}; break;
  }
  return h;
}

std::vector<int64_t> layout_shape(const Geometry& g, int64_t seq, int64_t n, int64_t d) {
  switch (g.layout) {
    case Layout::kBSH: return {g.batch, seq, n * d};
    case Layout::kSBH: return {seq, g.batch, n * d};
    case Layout::kBSND: return {g.batch, seq, n, d};
    default: return {g.batch, n, seq, d};
  }
}

void check_outputs_apart(const char* op, std::initializer_list<NamedView> outputs,
                         std::initializer_list<NamedView> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    core::require_no_self_overlap(op, out->name, *out->view);
    for (const NamedView& in : inputs)
      core::require_no_partial_overlap(op, out->name, *out->view, in.name, *in.view, false);
    for (auto other = outputs.begin(); other != out; ++other)
      core::require_no_partial_overlap(op, out->name, *out->view, other->name, *other->view, false);
  }
}

void check_stats(const char* op, const char* arg, const TensorView& t, const Geometry& g) {
  core::require_well_formed(op, arg, t);
  core::require_dtype(op, arg, t, {DType::kFloat32});
  core::require_shape(op, arg, t, {g.batch, g.heads, g.q_len, 8}, "[B, N1, Sq, 8] =");
}

}  // namespace tilegrad::ops::fa
