#include "ops/fused_linear_cross_entropy/flce_engine.h"

#include <algorithm>
#include <limits>

#include "core/gemm.h"
#include "core/parallel.h"
#include "ops/fused_linear_cross_entropy/fused_linear_cross_entropy_kernel.h"

namespace tilegrad::ops {
namespace {

using core::GemmMatrix;

GemmMatrix matrix_of(const TensorView& t) {
  return GemmMatrix(t.data, t.dtype, t.shape[0], t.shape[1], t.strides[0], t.strides[1]);
}

char* at(void* base, uint64_t offset) { return static_cast<char*>(base) + offset; }

// Runs fn(r0, r1) over [0, rows) split into contiguous row ranges, one per thread.
template <class Fn>
void for_row_tiles(int64_t rows, int threads, Fn&& fn) {
  const int64_t tiles = std::max<int64_t>(1, std::min<int64_t>(threads, rows));
  const int64_t per = (rows + tiles - 1) / tiles;
  core::parallel_for(tiles, threads, [&](int64_t tile) {
    const int64_t r0 = tile * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) fn(r0, r1);
  });
}

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

}  // namespace

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
                      const TensorView* logits_out, void* workspace) {
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
          const float* row = logits + r * vc;
          float m = max_out.f32(i), s = sum_out.f32(i);
          k->online_max_sum(row, vc, &m, &s);
          max_out.set_f32(i, m);
          sum_out.set_f32(i, s);
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

void flce_grad_run(const FlceGradTiling& t, const TensorView& input, const TensorView& weight,
                   const TensorView* softmax, const float* row_grad, const float* row_max, const float* row_sum,
                   const int64_t* row_target, const TensorView& grad_input, const TensorView& grad_weight,
                   void* workspace) {
  if (t.bt == 0 || t.v == 0 || t.h == 0) {
    flce_fill_zero(grad_input);
    flce_fill_zero(grad_weight);
    return;
  }
  const FlceKernels* k = flce_kernels(t.isa);
  const DType dt = input.dtype;
  const int64_t es = dtype_size(dt);
  const int64_t h = t.h;
  const GemmMatrix x = operand(input, t.input_copy_bytes ? at(workspace, t.input_copy_offset) : nullptr, t.threads);
  const GemmMatrix w =
      operand(weight, t.weight_copy_bytes ? at(workspace, t.weight_copy_offset) : nullptr, t.threads);
  float* logits = t.recompute ? reinterpret_cast<float*>(at(workspace, t.logits_offset)) : nullptr;
  char* g = at(workspace, t.g_offset);
  float* acc_in = reinterpret_cast<float*>(at(workspace, t.acc_input_offset));
  float* acc_w = reinterpret_cast<float*>(at(workspace, t.acc_weight_offset));
  const GemmMatrix gin = matrix_of(grad_input), gw = matrix_of(grad_weight);

  const auto block = [&](int64_t b0, int64_t bc, int64_t v0, int64_t vc, int64_t bi, int64_t vi) {
    if (t.recompute)
      core::gemm(x.row_block(b0, bc), w.row_block(v0, vc).t(),
                 GemmMatrix::rowmajor(logits, DType::kFloat32, bc, vc, vc), false, t.threads);
    for_row_tiles(bc, t.threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = b0 + r;
        FlceGradRow row;
        if (t.recompute) {
          row.src = logits + r * vc;
          row.src_stride = 1;
          row.from_logits = true;
          row.max = row_max[i];
          row.sum_exp = row_sum[i];
        } else {
          row.src = static_cast<const float*>(softmax->data) + i * softmax->strides[0] + v0 * softmax->strides[1];
          row.src_stride = softmax->strides[1];
        }
        row.n = vc;
        row.grad = row_grad[i];
        const int64_t c = row_target[i] - v0;
        row.target = (row_target[i] >= 0 && c >= 0 && c < vc) ? c : -1;
        row.out_dtype = dt;
        row.out = g + r * vc * es;
        k->grad_row(row);
      }
    });
    const GemmMatrix gm = GemmMatrix::rowmajor(g, dt, bc, vc, vc);
    // grad_input rows [b0, b0 + bc) (+)= G @ W[v0 : v0 + vc]
    if (t.grad_input_direct) {
      core::gemm(gm, w.row_block(v0, vc), gin.row_block(b0, bc), false, t.threads);
    } else {
      float* dst = acc_in + (t.v_outer ? b0 : 0) * h;
      core::gemm(gm, w.row_block(v0, vc), GemmMatrix::rowmajor(dst, DType::kFloat32, bc, h, h), vi > 0, t.threads);
    }
    // grad_weight rows [v0, v0 + vc) (+)= G^T @ X[b0 : b0 + bc]
    if (t.grad_weight_direct) {
      core::gemm(gm.t(), x.row_block(b0, bc), gw.row_block(v0, vc), false, t.threads);
    } else {
      float* dst = acc_w + (t.v_outer ? 0 : v0) * h;
      core::gemm(gm.t(), x.row_block(b0, bc), GemmMatrix::rowmajor(dst, DType::kFloat32, vc, h, h), bi > 0,
                 t.threads);
    }
  };

  if (t.v_outer) {
    for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk) {
      const int64_t vc = std::min(t.v_chunk, t.v - v0);
      for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk)
        block(b0, std::min(t.bt_chunk, t.bt - b0), v0, vc, bi, vi);
      if (!t.grad_weight_direct) cast_rows(k, acc_w, grad_weight, v0, vc, t.threads);
    }
    if (!t.grad_input_direct) cast_rows(k, acc_in, grad_input, 0, t.bt, t.threads);
  } else {
    for (int64_t bi = 0, b0 = 0; b0 < t.bt; ++bi, b0 += t.bt_chunk) {
      const int64_t bc = std::min(t.bt_chunk, t.bt - b0);
      for (int64_t vi = 0, v0 = 0; v0 < t.v; ++vi, v0 += t.v_chunk)
        block(b0, bc, v0, std::min(t.v_chunk, t.v - v0), bi, vi);
      if (!t.grad_input_direct) cast_rows(k, acc_in, grad_input, b0, bc, t.threads);
    }
    if (!t.grad_weight_direct) cast_rows(k, acc_w, grad_weight, 0, t.v, t.threads);
  }
}

uint64_t flce_whole_workspace(int64_t bt, int64_t v) { return uint64_t(bt) * uint64_t(v) * 4; }

void flce_whole_run(int threads, Isa isa, const TensorView& input, const TensorView& weight, const int64_t* target,
                    const float* row_grad, float* row_max, float* row_sum, float* row_pred,
                    const TensorView& grad_input, const TensorView& grad_weight, void* workspace) {
  const int64_t bt = input.shape[0], v = weight.shape[0];
  const FlceKernels* k = flce_kernels(isa);
  const DType dt = input.dtype;
  const int64_t es = dtype_size(dt);
  const GemmMatrix x = matrix_of(input), w = matrix_of(weight);
  float* logits = static_cast<float*>(workspace);
  core::gemm(x, w.t(), GemmMatrix::rowmajor(logits, DType::kFloat32, bt, v, v), false, threads);
  const float ninf = -std::numeric_limits<float>::infinity();
  for_row_tiles(bt, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* row = logits + i * v;
      float m = ninf, s = 0.0f;
      k->online_max_sum(row, v, &m, &s);
      row_max[i] = m;
      row_sum[i] = s;
      row_pred[i] = target[i] >= 0 ? row[target[i]] - m : 0.0f;
      FlceGradRow g;
      g.src = row;
      g.n = v;
      g.from_logits = true;
      g.max = m;
      g.sum_exp = s;
      g.grad = row_grad[i];
      g.target = target[i];
      g.out_dtype = dt;
      g.out = logits + i * v;  // in place: row i of G keeps row i's byte pitch
      k->grad_row(g);
    }
  });
  // Pack G's rows densely (row i moves down from byte 4*v*i to es*v*i, in order, so nothing unread
  // is overwritten): oneDNN's brgemm kernels want a dense leading dimension (with ld = 2v it falls
  // back to gemm:jit with a V x H fp32 scratchpad).
  if (es != 4) {
    char* base = reinterpret_cast<char*>(logits);
    for (int64_t i = 1; i < bt; ++i) std::memmove(base + i * v * es, base + i * v * 4, v * es);
  }
  const GemmMatrix gm = GemmMatrix::rowmajor(logits, dt, bt, v, v);
  core::gemm(gm, w, matrix_of(grad_input), false, threads);
  core::gemm(gm.t(), x, matrix_of(grad_weight), false, threads);
}

}  // namespace tilegrad::ops
