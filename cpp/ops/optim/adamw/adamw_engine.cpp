#include "ops/optim/adamw/adamw_engine.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/platform.h"
#include "core/tensor.h"

namespace tilegrad::ops::adamw {

std::string Names::arg(int k, size_t index) const {
  return lists ? core::concat(operand[k], "[", index, "]") : std::string(operand[k]);
}

std::string Names::step_arg(size_t index) const {
  return lists ? core::concat(step, "[", index, "]") : std::string(step);
}

void require_step(const Names& n, size_t index, const TensorView& step) {
  const std::string arg = n.step_arg(index);
  core::require_well_formed(n.op, arg.c_str(), step);
  core::require_dtype(n.op, arg.c_str(), step, {DType::kFloat32, DType::kInt64});
  core::check(step.numel() == 1, n.op, ": ", arg, " must have exactly one element, got shape ", shape_str(step.shape));
}

void require_scalar_tensor(const char* op, const char* arg, const TensorView& t) {
  core::require_well_formed(op, arg, t);
  core::require_dtype(op, arg, t, {DType::kFloat32});
  core::check(t.numel() == 1, op, ": ", arg, " must have exactly one element (or none: absent), got shape ",
              shape_str(t.shape));
}

namespace {

bool used(const Slot& s, int k) { return core::present(s.t[k]); }
bool is_output(int k) { return k != kGrad; }

// Every operand's bytes as one interval, sorted; two intervals that meet share memory. Intervals of
// strided views are conservative: interleaved views of one buffer count as overlapping.
struct Extent {
  core::ByteExtent bytes;
  size_t slot;
  int operand;
};

}  // namespace

void require_no_overlap(const Names& n, const std::vector<Slot>& slots) {
  std::vector<Extent> all;
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int k = 0; k < kNumOperands; ++k) {
      if (!used(slots[i], k) || slots[i].t[k].numel() == 0) continue;
      if (is_output(k)) core::require_no_self_overlap(n.op, n.arg(k, i).c_str(), slots[i].t[k]);
      all.push_back({core::byte_extent(slots[i].t[k]), i, k});
    }
  }
  std::sort(all.begin(), all.end(), [](const Extent& a, const Extent& b) { return a.bytes.lo < b.bytes.lo; });
  for (size_t j = 1; j < all.size(); ++j) {
    const Extent& a = all[j - 1];
    const Extent& b = all[j];
    core::check(b.bytes.lo >= a.bytes.hi, n.op, ": ", n.arg(b.operand, b.slot), " must not overlap ",
                n.arg(a.operand, a.slot), " in memory, got bytes [", b.bytes.lo, ", ", b.bytes.hi, ") and [",
                a.bytes.lo, ", ", a.bytes.hi, ")");
  }
}

namespace {

double read_number(const TensorView& t) {
  if (t.dtype == DType::kInt64) {
    int64_t v;
    std::memcpy(&v, t.data, 8);
    return static_cast<double>(v);
  }
  float f;
  std::memcpy(&f, t.data, 4);
  return f;
}

bool all_contiguous(const Slot& s) {
  for (int k = 0; k < kNumOperands; ++k)
    if (used(s, k) && !s.t[k].is_contiguous()) return false;
  return true;
}

// Byte offset of logical (row-major) element `linear` of a view.
int64_t byte_offset(const TensorView& t, int64_t linear) {
  int64_t off = 0;
  for (int d = t.rank() - 1; d >= 0; --d) {
    const int64_t extent = t.shape[d];
    off += (linear % extent) * t.strides[d];
    linear /= extent;
  }
  return off * dtype_size(t.dtype);
}

}  // namespace

AdamWLaunch::AdamWLaunch(const Names& names, std::vector<Slot> slots, const AdamWOptions& hyper, const Extras& extras)
    : names_(names), slots_(std::move(slots)), hyper_(hyper), extras_(extras) {
  std::vector<int64_t> numel, bpe;
  for (const Slot& s : slots_) {
    int64_t bytes = 0;
    for (int k = 0; k < kNumOperands; ++k)
      if (used(s, k)) bytes += dtype_size(s.t[k].dtype) * (is_output(k) && k != kParam16 ? 2 : 1);
    numel.push_back(s.t[kParam].numel());
    bpe.push_back(bytes);
    flat_.push_back(all_contiguous(s));
  }
  const core::Platform platform = core::Platform::current();
  threads_ = platform.threads;
  tiling_ = adamw_tiling(numel, bpe, platform);
  span_ = adamw_span_kernel(tiling_.isa);
  sumsq_ = adamw_sumsq_kernel(tiling_.isa);
  trace_.record(names_.op, {{names_.operand[kParam], slots_.empty() ? nullptr : &slots_[0].t[kParam]}}, tiling_);
}

void AdamWLaunch::bind(const core::Operands& tensors) {
  std::vector<Slot> slots = slots_;
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int k = 0; k < kNumOperands; ++k)
      if (used(slots[i], k)) slots[i].t[k].data = tensors[names_.arg(k, i)].data;
    slots[i].step.data = tensors[names_.step_arg(i)].data;
  }
  require_no_overlap(names_, slots);
  slots_ = std::move(slots);
  // (an empty one counts as absent: it stays so)
  if (core::present(extras_.grad_scale)) extras_.grad_scale.data = tensors[names_.grad_scale].data;
  if (core::present(extras_.found_inf)) extras_.found_inf.data = tensors[names_.found_inf].data;
}

Scalars AdamWLaunch::scalars_for(size_t i, float gmul) const {
  const Slot& s = slots_[i];
  const double step = read_number(s.step);
  core::check(std::isfinite(step) && step >= 0, names_.op, ": ", names_.step_arg(i),
              " must be finite and >= 0 (the update uses t = step + 1), got ", step);
  const AdamWOptions& h = hyper_;
  const double t = step + 1;
  Scalars k;
  k.gmul = gmul;
  k.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  k.w = static_cast<float>(1.0 - h.beta1);
  k.b2 = static_cast<float>(h.beta2);
  k.omb2 = static_cast<float>(1.0 - h.beta2);
  k.bc2s = static_cast<float>(std::pow(1.0 - std::pow(h.beta2, t), 0.5));
  k.eps = static_cast<float>(h.eps);
  k.nss = static_cast<float>(-(h.lr / (1.0 - std::pow(h.beta1, t))));
  k.amsgrad = h.amsgrad;
  k.write_param16 = used(s, kParam16);
  return k;
}

double grad_norm(const std::vector<TensorView>& grads, int threads, Isa isa) {
  const SumSqFn sumsq = adamw_sumsq_kernel(isa);
  const int64_t be = kNormBlockElems;
  std::vector<int64_t> first_block(grads.size() + 1, 0);
  for (size_t i = 0; i < grads.size(); ++i) first_block[i + 1] = first_block[i] + (grads[i].numel() + be - 1) / be;
  std::vector<double> partials(first_block.back());
  core::parallel_for(first_block.back(), threads, [&](int64_t block) {
    const size_t i = std::upper_bound(first_block.begin(), first_block.end(), block) - first_block.begin() - 1;
    const TensorView& g = grads[i];
    const int64_t b = (block - first_block[i]) * be;
    const int64_t e = std::min(g.numel(), b + be);
    if (g.is_contiguous()) {
      partials[block] = sumsq(g.dtype, static_cast<const char*>(g.data) + b * dtype_size(g.dtype), e - b);
      return;
    }
    constexpr int64_t kChunk = 256;
    alignas(64) char buf[kChunk * 4];
    const int64_t es = dtype_size(g.dtype);
    double sum = 0;
    for (int64_t at = b; at < e; at += kChunk) {
      const int64_t c = std::min(kChunk, e - at);
      for (int64_t j = 0; j < c; ++j)
        std::memcpy(buf + j * es, static_cast<const char*>(g.data) + byte_offset(g, at + j), es);
      sum += sumsq(g.dtype, buf, c);
    }
    partials[block] = sum;
  });
  double total = 0;
  for (double x : partials) total += x;
  return std::sqrt(total);
}

void AdamWLaunch::update(int64_t tile, const std::vector<Scalars>& scalars) const {
  for (int64_t j = tiling_.tile_begin[tile]; j < tiling_.tile_begin[tile + 1]; ++j) {
    const Segment& seg = tiling_.segments[j];
    const Slot& s = slots_[seg.slot];
    Dtypes dt;
    for (int k = 0; k < kNumOperands; ++k) dt.d[k] = s.t[k].dtype;
    if (flat_[seg.slot]) {
      char* ptrs[kNumOperands] = {};
      for (int k = 0; k < kNumOperands; ++k)
        if (used(s, k)) ptrs[k] = static_cast<char*>(s.t[k].data) + seg.begin * dtype_size(dt.d[k]);
      span_(dt, ptrs, seg.end - seg.begin, scalars[seg.slot]);
      continue;
    }
    // Strided operands: chunks gathered into stack buffers, updated, the outputs scattered back.
    constexpr int64_t kChunk = 256;
    alignas(64) char buf[kNumOperands][kChunk * 4];
    for (int64_t at = seg.begin; at < seg.end; at += kChunk) {
      const int64_t c = std::min(kChunk, seg.end - at);
      char* ptrs[kNumOperands] = {};
      for (int k = 0; k < kNumOperands; ++k) {
        if (!used(s, k)) continue;
        ptrs[k] = buf[k];
        const int64_t es = dtype_size(dt.d[k]);
        for (int64_t e = 0; e < c; ++e)
          std::memcpy(buf[k] + e * es, static_cast<const char*>(s.t[k].data) + byte_offset(s.t[k], at + e), es);
      }
      span_(dt, ptrs, c, scalars[seg.slot]);
      for (int k = 0; k < kNumOperands; ++k) {
        if (!used(s, k) || !is_output(k)) continue;
        const int64_t es = dtype_size(dt.d[k]);
        for (int64_t e = 0; e < c; ++e)
          std::memcpy(static_cast<char*>(s.t[k].data) + byte_offset(s.t[k], at + e), buf[k] + e * es, es);
      }
    }
  }
}

void AdamWLaunch::run(void*) {
  grad_norm_ = std::numeric_limits<double>::quiet_NaN();
  skipped_ = core::present(extras_.found_inf) && read_number(extras_.found_inf) == 1.0;
  float gmul = hyper_.maximize ? -1.0f : 1.0f;
  double inv_scale = 1.0;
  if (core::present(extras_.grad_scale)) {
    const float scale = static_cast<float>(read_number(extras_.grad_scale));
    inv_scale = 1.0f / scale;
    gmul *= static_cast<float>(inv_scale);
  }
  // Every step is read and checked before anything is written: bad input never half-updates.
  std::vector<Scalars> scalars;
  scalars.reserve(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) scalars.push_back(scalars_for(i, gmul));
  if (skipped_) return;
  if (!std::isnan(extras_.max_grad_norm)) {
    if (std::isnan(extras_.grad_norm)) {
      std::vector<TensorView> grads;
      for (const Slot& s : slots_) grads.push_back(s.t[kGrad]);
      grad_norm_ = adamw::grad_norm(grads, threads_, tiling_.isa) * std::fabs(inv_scale);
    } else {
      grad_norm_ = extras_.grad_norm;
    }
    // torch.nn.utils.clip_grad_norm_ in fp32: coef = reciprocal(norm + 1e-6) * max_norm, clamped to 1.
    const float norm32 = static_cast<float>(grad_norm_);
    const float coef = std::min((1.0f / (norm32 + 1e-6f)) * static_cast<float>(extras_.max_grad_norm), 1.0f);
    const float clipped = std::isnan(norm32) ? norm32 : coef;
    for (Scalars& k : scalars) k.gmul *= clipped;
  }
  core::parallel_for(tiling_.num_tiles, threads_, [&](int64_t tile) { update(tile, scalars); });
}

}  // namespace tilegrad::ops::adamw
