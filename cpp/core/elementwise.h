// Broadcast elementwise iteration shared by the elementwise operators (SiLU backward, BCE backward):
// operand 0 is the output; inputs broadcast (NumPy rules) to its shape. Dims are reordered so the
// output walks memory forwards, size-1 dims dropped and mergeable neighbours collapsed, so most
// cases become one long run. Kernels only ever see contiguous runs: operands with other strides
// (including broadcast zero strides) are packed through small stack buffers.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/describe.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

constexpr int kMaxOperands = 6;

struct ElementwiseLayout {
  int nops = 0;
  int ndim = 0;  // after collapsing; the innermost dim is last
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  char* base[kMaxOperands] = {};         // operand i's first element in walk order
  int64_t base_offset[kMaxOperands] = {};  // base[i] - operand i's data (dims walked backwards move it)
  int64_t elem_size[kMaxOperands] = {};
  int64_t byte_strides[kMaxOperands][kMaxDims] = {};  // 0 on broadcast dims
};

// ops[0] is the output, ops[1..] inputs whose shapes must broadcast to it (checked by the caller).
ElementwiseLayout make_elementwise_layout(const TensorView* const* ops, int nops);
// Points the layout at the data of `ops`: the operands it was made from, at new addresses.
void bind_elementwise_layout(ElementwiseLayout& layout, const TensorView* const* ops);

// True when every operand's innermost stride equals its element size (or the layout is 0-d).
bool inner_is_contiguous(const ElementwiseLayout& layout);

// Balanced split of [0, numel) into tiles for elementwise work (pure function, unit-tested):
// tile t covers [t * tile_elems, min(numel, (t + 1) * tile_elems)).
struct ElementwiseTiling {
  int64_t numel = 0;
  int num_tiles = 0;
  int64_t tile_elems = 0;
  bool streaming_stores = false;  // output bypasses the caches (non-temporal stores)

  // Its fields and the plan chosen, for the test hooks and the TILEGRAD_VERBOSE trace (core/describe.h).
  TILEGRAD_API void describe(FieldVisitor& v) const;
};

struct Platform;
// bytes_per_elem: all bytes one element moves (inputs + output); out_contiguous: NT stores possible.
ElementwiseTiling plan_elementwise(int64_t numel, int64_t bytes_per_elem, bool out_contiguous, const Platform& p);

// Calls run(ptrs, n, contiguous_output) on consecutive spans covering linear elements [begin, end)
// of the layout, where ptrs[i] points at n contiguous elements of operand i. Strided operands are
// gathered into (inputs) / scattered from (output) stack buffers of kPackElems elements.
// Operands [0, num_outputs) are outputs (scattered), the rest inputs (gathered); operand 0 decides
// the walk order, so further outputs should share its strides (two halves of one tensor).
constexpr int64_t kPackElems = 512;

template <class Run>
void for_each_span(const ElementwiseLayout& L, int64_t begin, int64_t end, Run&& run, int num_outputs = 1) {
  if (begin >= end) return;
  const int d = L.ndim - 1;
  const int64_t inner = d >= 0 ? L.shape[d] : 1;
  // Multi-index of `begin` over the outer dims.
  int64_t idx[kMaxDims] = {};
  int64_t rem = begin / inner;
  for (int k = d - 1; k >= 0; --k) {
    idx[k] = rem % L.shape[k];
    rem /= L.shape[k];
  }
  int64_t pos = begin;
  int64_t col = begin % inner;
  alignas(64) unsigned char pack[kMaxOperands][kPackElems * 8];
  while (pos < end) {
    char* p[kMaxOperands];
    bool packed[kMaxOperands];
    for (int i = 0; i < L.nops; ++i) {
      p[i] = L.base[i];
      for (int k = 0; k < d; ++k) p[i] += idx[k] * L.byte_strides[i][k];
      const int64_t s = d >= 0 ? L.byte_strides[i][d] : 0;
      p[i] += col * s;
      packed[i] = d >= 0 && s != L.elem_size[i];
    }
    const int64_t run_len = std::min(inner - col, end - pos);
    bool any_packed = false;
    for (int i = 0; i < L.nops; ++i) any_packed |= packed[i];
    if (!any_packed) {
      run(p, run_len, true);
    } else {
      for (int64_t off = 0; off < run_len; off += kPackElems) {
        const int64_t n = std::min(kPackElems, run_len - off);
        char* q[kMaxOperands];
        for (int i = 0; i < L.nops; ++i) {
          const int64_t s = L.byte_strides[i][d], es = L.elem_size[i];
          if (!packed[i]) {
            q[i] = p[i] + off * es;
            continue;
          }
          q[i] = reinterpret_cast<char*>(pack[i]);
          if (i < num_outputs) continue;  // output: scattered after the run
          const char* src = p[i] + off * s;
          for (int64_t j = 0; j < n; ++j) std::memcpy(q[i] + j * es, src + j * s, es);
        }
        run(q, n, !packed[0]);
        for (int i = 0; i < num_outputs; ++i) {
          if (!packed[i]) continue;
          const int64_t s = L.byte_strides[i][d], es = L.elem_size[i];
          for (int64_t j = 0; j < n; ++j) std::memcpy(p[i] + (off + j) * s, q[i] + j * es, es);
        }
      }
    }
    pos += run_len;
    col = 0;
    for (int k = d - 1; k >= 0; --k) {  // advance the outer multi-index
      if (++idx[k] < L.shape[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace tilegrad::core
