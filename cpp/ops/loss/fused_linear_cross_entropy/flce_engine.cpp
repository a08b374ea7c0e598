#include "ops/loss/fused_linear_cross_entropy/flce_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "core/gemm.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/loss/fused_linear_cross_entropy/flce_blocks.h"
#include "ops/loss/fused_linear_cross_entropy/flce_filter.h"
#include "ops/loss/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"

namespace tilegrad::ops {
namespace {

using core::GemmMatrix;

char* at(void* base, uint64_t offset) { return static_cast<char*>(base) + offset; }

// The matrix oneDNN reads: the view itself, or a row-major copy of it in the workspace.
GemmMatrix operand(const TensorView& t, void* copy, int threads) {
  if (!copy) return matrix_of(t);
  const int64_t rows = t.shape[0], cols = t.shape[1], es = dtype_size(t.dtype);
  const char* src = static_cast<const char*>(t.data);
  char* dst = static_cast<char*>(copy);
  for_row_tiles(rows, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(dst + (r * cols + c) * es, src + (r * t.strides[0] + c * t.strides[1]) * es, es);
  });
  return GemmMatrix::rowmajor(copy, t.dtype, rows, cols, cols);
}

// dst rows [r0, r0 + n) (a 2-D view) = fp32 rows of src (ld = cols), rounded once.
void cast_rows(const FlceKernels* k, const float* src, const TensorView& dst, int64_t r0, int64_t n, int threads) {
  const int64_t cols = dst.shape[1], es = dtype_size(dst.dtype);
  char* base = static_cast<char*>(dst.data);
  for_row_tiles(n, threads, [&](int64_t a, int64_t b) {
    for (int64_t r = a; r < b; ++r)
      k->cast_row(src + r * cols, cols, dst.dtype, base + (r0 + r) * dst.strides[0] * es, dst.strides[1]);
  });
}

// acc[v0 + j] += sum over the block's rows of G[r][j], rows in order (so every column's sum has one
// order whatever the thread count); columns split across threads.
void accumulate_columns(const FlceKernels* k, float* acc, const char* g, DType dt, int64_t rows, int64_t cols,
                        int threads) {
  const int64_t es = dtype_size(dt);
  const int64_t tiles = std::max<int64_t>(1, std::min<int64_t>(threads, (cols + 255) / 256));
  const int64_t per = ((cols + tiles - 1) / tiles + 15) / 16 * 16;
  core::parallel_for(tiles, threads, [&](int64_t tile) {
    const int64_t c0 = tile * per, c1 = std::min(cols, c0 + per);
    if (c0 >= c1) return;
    for (int64_t r = 0; r < rows; ++r) k->accumulate_row(acc + c0, g + (r * cols + c0) * es, dt, c1 - c0);
  });
}

}  // namespace

FlceRowResult flce_row_result(const FlceLossSpec& s, int64_t i, bool valid, float max, float sum_exp,
                              float z_target, float wz) {
  FlceRowResult r;
  if (!valid) return r;
  const double eps = s.eps, lambda = s.lambda, classes = double(std::max<int64_t>(s.classes, 1));
  const double log_s = std::log(double(sum_exp));
  const double lse = double(max) + log_s;
  const double wt = s.target_w ? double(s.target_w[i]) : 1.0;
  double ce = (1.0 - eps) * wt * (log_s - (double(z_target) - double(max)));
  if (eps > 0.0) ce += eps / classes * (s.class_w_total * lse - double(wz));
  r.ce = float(ce);
  r.zloss = float(lambda * lse * lse);
  const double sc = s.scale[i], zs = s.zscale ? double(s.zscale[i]) : 0.0;
  r.coef_p = float(sc * ((1.0 - eps) * wt + eps * s.class_w_total / classes) + zs * 2.0 * lambda * lse);
  r.coef_t = float(sc * (1.0 - eps) * wt);
  r.coef_u = float(sc * eps / classes);
  return r;
}

bool flce_gemmable(const TensorView& m) {
  return m.rank() == 2 && core::gemm_layout_ok(m.shape[0], m.shape[1], m.strides[0], m.strides[1]);
}

void flce_fill_zero(const TensorView& t) {
  const int64_t n = t.numel(), es = dtype_size(t.dtype);
  if (n == 0) return;
  std::vector<int64_t> idx(t.rank(), 0);
  char* base = static_cast<char*>(t.data);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int d = 0; d < t.rank(); ++d) off += idx[d] * t.strides[d];
    std::memset(base + off * es, 0, es);
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
}

void flce_forward_run(const FlceForwardTiling& t, const TensorView& input, const TensorView& weight,
                      const int64_t* local_target, const Vec1& max_out, const Vec1& sum_out, const Vec1& pred_out,
                      const TensorView* logits_out, void* workspace, const FlceFeatures* f) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < t.bt; ++i) {
    max_out.set_f32(i, ninf);
    sum_out.set_f32(i, 0.0f);
    pred_out.set_f32(i, 0.0f);
  }
  if (t.bt == 0 || t.v == 0) return;
  const FlceKernels* k = flce_kernels(t.isa);
  const GemmMatrix x = operand(input, t.input_copy_bytes ? at(workspace, t.input_copy_offset) : nullptr, t.threads);
  const GemmMatrix w =
      operand(weight, t.weight_copy_bytes ? at(workspace, t.weight_copy_offset) : nullptr, t.threads);
  float* logits = reinterpret_cast<float*>(at(workspace, t.logits_offset));
  for (int64_t b0 = 0; b0 < t.bt; b0 += t.bt_chunk) {
    const int64_t bc = std::min(t.bt_chunk, t.bt - b0);
    for (int64_t v0 = 0; v0 < t.v; v0 += t.v_chunk) {
      const int64_t vc = std::min(t.v_chunk, t.v - v0);
      const GemmMatrix l = GemmMatrix::rowmajor(logits, DType::kFloat32, bc, vc, vc);
      core::gemm(x.row_block(b0, bc), w.row_block(v0, vc).t(), l, false, t.threads);
      for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t i = b0 + r;
          float* row = logits + r * vc;
          if (f && (f->bias || f->softcap != 0.0f)) k->transform_row(row, vc, f->bias ? f->bias + v0 : nullptr, f->softcap);
          float m = max_out.f32(i), s = sum_out.f32(i);
          const float m_old = m;
          k->online_max_sum(row, vc, &m, &s);
          max_out.set_f32(i, m);
          sum_out.set_f32(i, s);
          if (f && f->bound && f->bound->row_exp_norm_sum) {
            float& a = f->bound->row_exp_norm_sum[i];  // rescaled to the new max, as the sum of exp
            a = (a == 0.0f ? 0.0f : a * std::exp(m_old - m)) +
                k->exp_weighted_sum(row, vc, m, f->bound->weight_norms + v0);
          }
          if (f && f->row_wsum) f->row_wsum[i] += k->weighted_sum(row, f->class_w ? f->class_w + v0 : nullptr, vc);
          const int64_t c = local_target[i] - v0;
          if (local_target[i] >= 0 && c >= 0 && c < vc) pred_out.set_f32(i, row[c]);
          if (logits_out) {
            const int64_t es = dtype_size(logits_out->dtype);
            char* dst = static_cast<char*>(logits_out->data) +
                        (i * logits_out->strides[0] + v0 * logits_out->strides[1]) * es;
            k->cast_row(row, vc, logits_out->dtype, dst, logits_out->strides[1]);
          }
        }
      });
    }
  }
  for (int64_t i = 0; i < t.bt; ++i)
    pred_out.set_f32(i, local_target[i] >= 0 ? pred_out.f32(i) - max_out.f32(i) : 0.0f);
}

namespace {

// One flce_grad_run call: per G block, its rows (from the recomputed logits or the given softmax,
// plus grad_bias's column sums), then its two gradient products, exact or filtered, into the outputs
// or their fp32 accumulators; the accumulators are rounded into the outputs when complete.
class GradPass {
 public:
  GradPass(const FlceGradTiling& t, const FlceOperands& m, const TensorView* softmax, const FlceGradRows& rows,
           void* workspace, const FlceFeatures* f)
      : t_(t), m_(m), softmax_(softmax), rows_(rows), f_(f), k_(flce_kernels(t.isa)), dt_(m.input.dtype),
        es_(dtype_size(dt_)) {
    x_ = operand(m.input, t.input_copy_bytes ? at(workspace, t.input_copy_offset) : nullptr, t.threads);
    w_ = operand(m.weight, t.weight_copy_bytes ? at(workspace, t.weight_copy_offset) : nullptr, t.threads);
    logits_ = t.recompute ? reinterpret_cast<float*>(at(workspace, t.logits_offset)) : nullptr;
    g_ = at(workspace, t.g_offset);
    acc_in_ = reinterpret_cast<float*>(at(workspace, t.acc_input_offset));
    acc_w_ = reinterpret_cast<float*>(at(workspace, t.acc_weight_offset));
    gin_ = matrix_of(m.grad_input);
    gw_ = matrix_of(m.grad_weight);
    filter_ = f && (f->filter_eps > 0.0f || f->bound);
    gin_written_.assign(filter_ ? t.acc_input_rows : 0, 0);
    gw_written_.assign(filter_ ? t.acc_weight_rows : 0, 0);
  }

  // The G blocks in the tiling's loop order; an accumulator is flushed when its rows are complete.
  void run() {
    const FlceGradTiling& t = t_;
    if (t.v_outer) {
      for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk) {
        const int64_t vc = std::min(t.v_chunk, t.v - v0);
        for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk)
          block(b0, std::min(t.bt_chunk, t.bt - b0), v0, vc, bi, vi);
        if (!t.grad_weight_direct) flush(acc_w_, gw_written_, m_.grad_weight, v0, vc);
      }
      if (!t.grad_input_direct) flush(acc_in_, gin_written_, m_.grad_input, 0, t.bt);
    } else {
      for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk) {
        const int64_t bc = std::min(t.bt_chunk, t.bt - b0);
        for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk)
          block(b0, bc, v0, std::min(t.v_chunk, t.v - v0), bi, vi);
        if (!t.grad_input_direct) flush(acc_in_, gin_written_, m_.grad_input, b0, bc);
      }
      if (!t.grad_weight_direct) flush(acc_w_, gw_written_, m_.grad_weight, 0, t.v);
    }
  }

 private:
  // G block (rows b0.., columns v0..; bi, vi: its indices along each dimension).
  void block(int64_t b0, int64_t bc, int64_t v0, int64_t vc, int64_t bi, int64_t vi) {
    if (t_.recompute)
      core::gemm(x_.row_block(b0, bc), w_.row_block(v0, vc).t(),
                 GemmMatrix::rowmajor(logits_, DType::kFloat32, bc, vc, vc), false, t_.threads);
    for_row_tiles(bc, t_.threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) g_row(b0, r, v0, vc);
    });
    if (f_ && f_->grad_bias_acc) accumulate_columns(k_, f_->grad_bias_acc + v0, g_, dt_, bc, vc, t_.threads);
    const GemmMatrix gm = GemmMatrix::rowmajor(g_, dt_, bc, vc, vc);
    if (filter_) return filtered_products(gm, b0, bc, v0, vc);
    exact_products(gm, b0, bc, v0, vc, bi, vi);
  }

  // Row r of the G block (problem row b0 + r) in the input dtype, from its logits (transformed in
  // place: bias, softcap) or its softmax row.
  void g_row(int64_t b0, int64_t r, int64_t v0, int64_t vc) const {
    const int64_t i = b0 + r;
    const FlceFeatures* f = f_;
    FlceGradRow row;
    if (t_.recompute) {
      float* lrow = logits_ + r * vc;
      if (f && (f->bias || f->softcap != 0.0f))
        k_->transform_row(lrow, vc, f->bias ? f->bias + v0 : nullptr, f->softcap);
      row.src = lrow;
      row.src_stride = 1;
      row.from_logits = true;
      row.max = rows_.max[i];
      row.sum_exp = rows_.sum_exp[i];
    } else {
      row.src = static_cast<const float*>(softmax_->data) + i * softmax_->strides[0] + v0 * softmax_->strides[1];
      row.src_stride = softmax_->strides[1];
    }
    row.n = vc;
    row.grad = rows_.grad[i];
    row.target_coef = rows_.grad[i];
    if (f && t_.recompute) {
      if (f->row_target_coef) row.target_coef = f->row_target_coef[i];
      if (f->row_uniform_coef) row.uniform_coef = f->row_uniform_coef[i];
      row.softcap = f->softcap;
      row.class_w = f->class_w ? f->class_w + v0 : nullptr;
    }
    const int64_t c = rows_.target[i] - v0;
    row.target = (rows_.target[i] >= 0 && c >= 0 && c < vc) ? c : -1;
    row.out_dtype = dt_;
    row.out = g_ + r * vc * es_;
    k_->grad_row(row);
  }

  // grad_input rows [b0, b0 + bc) (+)= G @ W[v0 : v0 + vc]; grad_weight rows [v0, v0 + vc) (+)= G^T @
  // X[b0 : b0 + bc]: into the output itself when this block completes it, else into its accumulator
  // (overwritten by the first block of a sum).
  void exact_products(const GemmMatrix& gm, int64_t b0, int64_t bc, int64_t v0, int64_t vc, int64_t bi, int64_t vi) {
    const int64_t h = t_.h;
    if (t_.grad_input_direct) {
      core::gemm(gm, w_.row_block(v0, vc), gin_.row_block(b0, bc), false, t_.threads);
    } else {
      float* dst = acc_in_ + (t_.v_outer ? b0 : 0) * h;
      core::gemm(gm, w_.row_block(v0, vc), GemmMatrix::rowmajor(dst, DType::kFloat32, bc, h, h), vi > 0, t_.threads);
    }
    if (t_.grad_weight_direct) {
      core::gemm(gm.t(), x_.row_block(b0, bc), gw_.row_block(v0, vc), false, t_.threads);
    } else {
      float* dst = acc_w_ + (t_.v_outer ? 0 : v0) * h;
      core::gemm(gm.t(), x_.row_block(b0, bc), GemmMatrix::rowmajor(dst, DType::kFloat32, vc, h, h), bi > 0,
                 t_.threads);
    }
  }

  // The same products over the blocks the filter keeps (flce_filter.h).
  void filtered_products(const GemmMatrix& gm, int64_t b0, int64_t bc, int64_t v0, int64_t vc) {
    const int64_t h = t_.h, ai = t_.v_outer ? b0 : 0, aw = t_.v_outer ? 0 : v0;
    const FlceGBlock g{gm, b0, v0, rows_.grad + b0, x_.row_block(b0, bc), w_.row_block(v0, vc)};
    filtered_gradients(
        k_, g, *f_,
        t_.grad_input_direct ? complete_into(gin_.row_block(b0, bc))
                             : accumulate_into(GemmMatrix::rowmajor(acc_in_ + ai * h, DType::kFloat32, bc, h, h),
                                               gin_written_.data() + ai),
        t_.grad_weight_direct ? complete_into(gw_.row_block(v0, vc))
                              : accumulate_into(GemmMatrix::rowmajor(acc_w_ + aw * h, DType::kFloat32, vc, h, h),
                                                gw_written_.data() + aw),
        t_.threads);
  }

  // An fp32 accumulator's rows, rounded into out rows [r0, r0 + rows) (filtering: unreached rows are 0).
  void flush(const float* acc, std::vector<uint8_t>& written, const TensorView& out, int64_t r0, int64_t rows) const {
    if (filter_)
      zero_unwritten_rows(k_, GemmMatrix::rowmajor(acc, DType::kFloat32, rows, t_.h, t_.h), written.data());
    cast_rows(k_, acc, out, r0, rows, t_.threads);
  }

  const FlceGradTiling& t_;
  const FlceOperands& m_;
  const TensorView* softmax_;
  FlceGradRows rows_;
  const FlceFeatures* f_;
  const FlceKernels* k_;
  DType dt_;
  int64_t es_;
  GemmMatrix x_, w_, gin_, gw_;
  float *logits_ = nullptr, *acc_in_ = nullptr, *acc_w_ = nullptr;
  char* g_ = nullptr;
  bool filter_ = false;
  std::vector<uint8_t> gin_written_, gw_written_;
};

}  // namespace

void flce_grad_run(const FlceGradTiling& t, const FlceOperands& m, const TensorView* softmax, const FlceGradRows& rows,
                   void* workspace, const FlceFeatures* f) {
  if (t.bt == 0 || t.v == 0 || t.h == 0) {
    flce_fill_zero(m.grad_input);
    flce_fill_zero(m.grad_weight);
    return;
  }
  GradPass(t, m, softmax, rows, workspace, f).run();
}

namespace {

// One flce_chunked_run call: per row chunk the fp32 logits (one GEMM), each row's loss terms and G row,
// then both gradient products (exact, or filtered); grad_weight sums over the chunks in fp32.
class ChunkedPass {
 public:
  ChunkedPass(const FlceFusedTiling& t, const FlceOperands& m, const int64_t* target, const FlceLossSpec& spec,
              const FlceFeatures& f, const FlceRowLosses& out, void* workspace)
      : t_(t), m_(m), target_(target), spec_(spec), f_(f), out_(out), k_(flce_kernels(t.isa)), dt_(m.input.dtype),
        es_(dtype_size(dt_)) {
    // An absent gradient (undefined dtype) is not computed.
    want_gin_ = core::present(m.grad_input);
    want_gw_ = core::present(m.grad_weight);
    x_ = matrix_of(m.input);
    w_ = matrix_of(m.weight);
    if (want_gin_) gin_ = matrix_of(m.grad_input);
    if (want_gw_) gw_ = matrix_of(m.grad_weight);
    logits_ = reinterpret_cast<float*>(at(workspace, t.logits_offset));
    // fp32: G overwrites the logits row by row; 16-bit: its own dense buffer (no repacking pass).
    g_ = t.g_bytes ? at(workspace, t.g_offset) : reinterpret_cast<char*>(logits_);
    acc_w_ = t.acc_weight_bytes ? reinterpret_cast<float*>(at(workspace, t.acc_weight_offset)) : nullptr;
    filter_ = f.filter_eps > 0.0f || f.bound;
    // grad_weight sums over the chunks in fp32: the accumulator (16-bit weights), else the fp32 output
    // itself. (Filtering, 16-bit, whole plan: no accumulator, the one chunk completes it.)
    gw_acc_ = acc_w_ ? GemmMatrix::rowmajor(acc_w_, DType::kFloat32, t.v, t.h, t.h) : gw_;
    gw_sums_ = acc_w_ || dt_ == DType::kFloat32;
    gw_written_.assign(filter_ ? t.v : 0, 0);
    row_coef_.resize(filter_ ? t.chunk_rows : 0);  // the chunk's softmax coefficients
  }

  void run() {
    const FlceFusedTiling& t = t_;
    for (int64_t ci = 0, b0 = 0; b0 < t.bt; ++ci, b0 += t.chunk_rows) {
      const int64_t bc = std::min(t.chunk_rows, t.bt - b0);
      core::gemm(x_.row_block(b0, bc), w_.t(), GemmMatrix::rowmajor(logits_, DType::kFloat32, bc, t.v, t.v), false,
                 t.threads);
      for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) row(b0, r);
      });
      if (f_.grad_bias_acc) accumulate_columns(k_, f_.grad_bias_acc, g_, dt_, bc, t.v, t.threads);
      const GemmMatrix gm = GemmMatrix::rowmajor(g_, dt_, bc, t.v, t.v);
      if (filter_) {
        filtered_products(gm, b0, bc);
        continue;
      }
      if (want_gin_) core::gemm(gm, w_, gin_.row_block(b0, bc), false, t.threads);
      if (want_gw_) core::gemm(gm.t(), x_.row_block(b0, bc), gw_acc_, ci > 0, t.threads);
    }
    if (filter_ && gw_sums_ && want_gw_) zero_unwritten_rows(k_, gw_acc_, gw_written_.data());
    if (acc_w_ && want_gw_) cast_rows(k_, acc_w_, m_.grad_weight, 0, t.v, t.threads);
  }

 private:
  // Row r of the chunk (problem row b0 + r): logits transform, max / sum-exp, loss terms, G row.
  void row(int64_t b0, int64_t r) {
    const int64_t i = b0 + r, v = t_.v;
    float* z = logits_ + r * v;
    if (f_.bias || f_.softcap != 0.0f) k_->transform_row(z, v, f_.bias, f_.softcap);
    float m = -std::numeric_limits<float>::infinity(), s = 0.0f;
    k_->online_max_sum(z, v, &m, &s);
    const int64_t tc = target_[i];
    const float wz = spec_.eps > 0.0f ? k_->weighted_sum(z, f_.class_w, v) : 0.0f;
    const FlceRowResult res = flce_row_result(spec_, i, tc >= 0, m, s, tc >= 0 ? z[tc] : 0.0f, wz);
    out_.ce[i] = res.ce;
    out_.zloss[i] = res.zloss;
    if (filter_) row_coef_[r] = res.coef_p;
    FlceGradRow gr;
    gr.src = z;
    gr.n = v;
    gr.from_logits = true;
    gr.max = m;
    gr.sum_exp = s;
    gr.grad = res.coef_p;
    gr.target_coef = res.coef_t;
    gr.uniform_coef = res.coef_u;
    gr.softcap = f_.softcap;
    gr.class_w = f_.class_w;
    gr.target = tc;
    gr.out_dtype = dt_;
    gr.out = g_ + r * v * es_;
    k_->grad_row(gr);
  }

  void filtered_products(const GemmMatrix& gm, int64_t b0, int64_t bc) {
    const FilteredDst gin_dst = want_gin_ ? complete_into(gin_.row_block(b0, bc)) : FilteredDst();
    const FilteredDst gw_dst = !want_gw_ ? FilteredDst()
                               : gw_sums_ ? accumulate_into(gw_acc_, gw_written_.data())
                                          : complete_into(gw_);
    filtered_gradients(k_, {gm, b0, 0, row_coef_.data(), x_.row_block(b0, bc), w_}, f_, gin_dst, gw_dst, t_.threads);
  }

  const FlceFusedTiling& t_;
  const FlceOperands& m_;
  const int64_t* target_;
  const FlceLossSpec& spec_;
  const FlceFeatures& f_;
  FlceRowLosses out_;
  const FlceKernels* k_;
  DType dt_;
  int64_t es_;
  bool want_gin_ = false, want_gw_ = false, filter_ = false, gw_sums_ = false;
  GemmMatrix x_, w_, gin_, gw_, gw_acc_;
  float *logits_ = nullptr, *acc_w_ = nullptr;
  char* g_ = nullptr;
  std::vector<uint8_t> gw_written_;
  std::vector<float> row_coef_;
};

}  // namespace

void flce_chunked_run(const FlceFusedTiling& t, const FlceOperands& m, const int64_t* target, const FlceLossSpec& spec,
                      const FlceFeatures& f, const FlceRowLosses& out, void* workspace) {
  ChunkedPass(t, m, target, spec, f, out, workspace).run();
}

}  // namespace tilegrad::ops
