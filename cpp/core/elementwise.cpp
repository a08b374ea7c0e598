#include "core/elementwise.h"

#include <algorithm>
#include <cstdlib>

#include "core/platform.h"
#include "core/tiling.h"

namespace tilegrad::core {

ElementwiseLayout make_elementwise_layout(const TensorView* const* ops, int nops) {
  ElementwiseLayout L;
  L.nops = nops;
  const TensorView& out = *ops[0];
  const int rank = out.rank();
  L.numel = out.numel();
  // Per-operand byte strides over the output's dims (0 where an input is broadcast).
  int64_t shape[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
  for (int i = 0; i < nops; ++i) {
    const TensorView& t = *ops[i];
    L.elem_size[i] = dtype_size(t.dtype);
    const int off = rank - t.rank();
    for (int k = 0; k < rank; ++k) {
      const int kt = k - off;
      strides[i][k] = (kt < 0 || t.shape[kt] == 1) ? 0 : t.strides[kt] * L.elem_size[i];
    }
  }
  // Keep dims of size > 1, make every output stride positive (flipping a dim moves all bases).
  int dims[kMaxDims];
  int n = 0;
  for (int k = 0; k < rank; ++k) {
    shape[k] = out.shape[k];
    if (out.shape[k] == 1) continue;
    if (strides[0][k] < 0) {
      for (int i = 0; i < nops; ++i) {
        L.base_offset[i] += (shape[k] - 1) * strides[i][k];
        strides[i][k] = -strides[i][k];
      }
    }
    dims[n++] = k;
  }
  // Order dims by decreasing output stride so the innermost loop walks the output contiguously.
  std::stable_sort(dims, dims + n, [&](int a, int b) { return strides[0][a] > strides[0][b]; });
  // Collapse neighbours that form one linear walk for every operand.
  L.ndim = 0;
  for (int j = 0; j < n; ++j) {
    const int k = dims[j];
    if (L.ndim > 0) {
      const int last = L.ndim - 1;
      bool mergeable = true;
      for (int i = 0; i < nops; ++i)
        mergeable &= L.byte_strides[i][last] == strides[i][k] * shape[k];
      if (mergeable) {
        L.shape[last] *= shape[k];
        for (int i = 0; i < nops; ++i) L.byte_strides[i][last] = strides[i][k];
        continue;
      }
    }
    L.shape[L.ndim] = shape[k];
    for (int i = 0; i < nops; ++i) L.byte_strides[i][L.ndim] = strides[i][k];
    ++L.ndim;
  }
  bind_elementwise_layout(L, ops);
  return L;
}

void bind_elementwise_layout(ElementwiseLayout& L, const TensorView* const* ops) {
  for (int i = 0; i < L.nops; ++i) L.base[i] = static_cast<char*>(ops[i]->data) + L.base_offset[i];
}

bool inner_is_contiguous(const ElementwiseLayout& L) {
  if (L.ndim == 0) return true;
  for (int i = 0; i < L.nops; ++i)
    if (L.byte_strides[i][L.ndim - 1] != L.elem_size[i]) return false;
  return true;
}

ElementwiseTiling plan_elementwise(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, const Platform& p) {
  constexpr int64_t kAlign = 64;  // tile starts on 64-element boundaries (whole cache lines)
  ElementwiseTiling t;
  t.numel = numel;
  if (numel <= 0) return t;
  const int threads = static_cast<int>(useful_threads(numel, p));
  int64_t per = (numel + threads - 1) / threads;
  per = (per + kAlign - 1) / kAlign * kAlign;
  t.tile_elems = per;
  t.num_tiles = static_cast<int>((numel + per - 1) / per);
  // Streaming stores pay off once the data cannot stay in the last-level cache anyway. From half of
  // it on: the L3 is shared with other cores and processes (measured with BCE backward 4096x1024
  // fp32, 48 MB: 1.35 -> 1.08 ms; bf16 32 MB unchanged).
  t.streaming_stores = out_contiguous && numel * bytes_per_elem > p.l3_bytes / 2;
  return t;
}

void ElementwiseTiling::describe(FieldVisitor& v) const {
  v.fields({{"numel", numel}, {"num_tiles", num_tiles}, {"tile_elems", tile_elems},
            {"streaming_stores", streaming_stores}});
}

}  // namespace tilegrad::core
