// Fixed-order reductions (see ordered_reduce.h for the contract). Compiled once at the baseline
// ISA: no FMA contraction, so the same bits on every CPU.
#include "core/ordered_reduce.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/parallel.h"

namespace tilegrad::core {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int64_t kColumnChunk = 256;  // columns per tile of the final pass (2 KiB of double accumulators)

}  // namespace

RowBlocks plan_row_blocks(int64_t rows, int64_t cols) {
  RowBlocks rb;
  rb.rows = std::max<int64_t>(rows, 0);
  rb.cols = std::max<int64_t>(cols, 0);
  if (rb.rows == 0 || rb.cols == 0) return rb;
  int64_t br = std::max<int64_t>(ceil_div(rb.rows, RowBlocks::kMaxBlocks), ceil_div(RowBlocks::kMinBlockElems, rb.cols));
  const int64_t partial_bytes = rb.partial_stride() * int64_t{sizeof(float)};
  const int64_t max_blocks = std::max<int64_t>(1, RowBlocks::kMaxWorkspaceBytes / partial_bytes);
  br = std::max(br, ceil_div(rb.rows, max_blocks));
  rb.block_rows = std::min(br, rb.rows);
  rb.num_blocks = ceil_div(rb.rows, rb.block_rows);
  return rb;
}

void sum_row_block_partials(const RowBlocks& rb, const void* workspace, float* out, int threads, int64_t out_stride) {
  const int64_t tiles = ceil_div(rb.cols, kColumnChunk);
  parallel_for(tiles, threads, [&](int64_t t) {
    const int64_t c0 = t * kColumnChunk, n = std::min(kColumnChunk, rb.cols - c0);
    double acc[kColumnChunk] = {};
    for (int64_t b = 0; b < rb.num_blocks; ++b) {
      const float* p = rb.partial(workspace, b) + c0;
      for (int64_t c = 0; c < n; ++c) acc[c] += p[c];
    }
    for (int64_t c = 0; c < n; ++c) out[(c0 + c) * out_stride] = static_cast<float>(acc[c]);
  });
}

void ordered_column_sum(const float* a, int64_t rows, int64_t cols, int64_t lda, float* out, void* workspace,
                        int threads) {
  const RowBlocks rb = plan_row_blocks(rows, cols);
  parallel_for(rb.num_blocks, threads, [&](int64_t b) {
    float* p = rb.partial(workspace, b);
    std::fill(p, p + cols, 0.0f);
    for (int64_t r = rb.begin(b); r < rb.end(b); ++r) {
      const float* row = a + r * lda;
      for (int64_t c = 0; c < cols; ++c) p[c] += row[c];
    }
  });
  sum_row_block_partials(rb, workspace, out, threads);
}

// ---- sum of squares --------------------------------------------------------------------------
namespace {

template <class Load>
double chunk_squares(const char* base, int64_t n, int64_t stride_bytes, Load load) {
  // float -> double squares are exact (24-bit significands); only the additions round.
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const double v = load(base + (i + k) * stride_bytes);
      acc[k] += v * v;
    }
  for (int k = 0; i < n; ++i, ++k) {
    const double v = load(base + i * stride_bytes);
    acc[k] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double span_chunk_squares(const FloatSpan& s, int64_t chunk) {
  const int64_t esize = s.dtype == DType::kFloat32 ? 4 : 2;
  const int64_t first = chunk * kSquaresChunk, n = std::min(kSquaresChunk, s.n - first);
  const int64_t stride_bytes = s.stride * esize;
  const char* base = static_cast<const char*>(s.data) + first * stride_bytes;
  switch (s.dtype) {
    case DType::kFloat32:
      return chunk_squares(base, n, stride_bytes, [](const char* p) {
        float f;
        std::memcpy(&f, p, 4);
        return static_cast<double>(f);
      });
    case DType::kFloat16:
      return chunk_squares(base, n, stride_bytes, [](const char* p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return static_cast<double>(f16_to_f32(h));
      });
    default:
      return chunk_squares(base, n, stride_bytes, [](const char* p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return static_cast<double>(bf16_to_f32(h));
      });
  }
}

}  // namespace

int64_t sum_squares_workspace_bytes(const FloatSpan* spans, int64_t count) {
  int64_t chunks = 0;
  for (int64_t i = 0; i < count; ++i) chunks += ceil_div(std::max<int64_t>(spans[i].n, 0), kSquaresChunk);
  return (count + 1 + chunks) * 8;
}

double sum_squares(const FloatSpan* spans, int64_t count, void* workspace, int threads) {
  // Workspace: chunk offsets first[0..count] (int64), then one double per chunk.
  auto* first = static_cast<int64_t*>(workspace);
  first[0] = 0;
  for (int64_t i = 0; i < count; ++i) first[i + 1] = first[i] + ceil_div(std::max<int64_t>(spans[i].n, 0), kSquaresChunk);
  const int64_t chunks = first[count];
  double* partial = reinterpret_cast<double*>(first + count + 1);
  parallel_for(chunks, threads, [&](int64_t t) {
    const int64_t span = std::upper_bound(first, first + count + 1, t) - first - 1;
    partial[t] = span_chunk_squares(spans[span], t - first[span]);
  });
  double total = 0;
  for (int64_t t = 0; t < chunks; ++t) total += partial[t];
  return total;
}

}  // namespace tilegrad::core
