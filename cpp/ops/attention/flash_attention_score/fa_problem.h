// What the forward and the grad of flash attention share: the geometry read from q/k/v and the
// layout, each tensor seen as [B, N, S, D] with element strides, which (row, column) pairs a sparse
// mode keeps, and the attribute checks. All validation messages are "<op>: <arg> <rule>, got <value>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tilegrad/flash_attention_score.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::fa {

enum class Layout { kBSH, kSBH, kBSND, kBNSD };

// A tensor of the layout as [B, N, S, D]: element (b, n, s, d) at data + (b*sb + n*sn + s*ss + d*sd) * size.
struct Heads {
  char* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t sb = 0, sn = 0, ss = 0, sd = 0;
  char* row(int64_t b, int64_t n, int64_t s) const {
    return data + (b * sb + n * sn + s * ss) * dtype_size(dtype);
  }
  // The same heads at the new address of their tensor's data.
  void bind(void* new_data) { data = static_cast<char*>(new_data); }
};

struct Geometry {
  Layout layout = Layout::kBSH;
  int64_t batch = 0, heads = 0, kv_heads = 0, group = 1;  // B, N1, N2, G = N1 / N2
  int64_t q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;  // Sq, Skv, D, Dv
};

// Columns row i keeps: [max(0, i + lo_off), min(Skv, i + hi_off + 1)) minus the explicit mask's 1s.
// The offsets come from the sparse mode (the vendor's band, rewritten to the left-up origin).
struct Window {
  int64_t lo_off = 0, hi_off = 0;
  int64_t lo(int64_t i) const { return i + lo_off < 0 ? 0 : i + lo_off; }
  int64_t hi(int64_t i, int64_t kv_len) const { return i + hi_off + 1 > kv_len ? kv_len : i + hi_off + 1; }
};

// The explicit attenMask (modes 0 and 1): element (b, n, i, j) at data + b*sb + n*sn + i*si + j*sj
// bytes (broadcast dims have stride 0); data == nullptr when there is none or the mode ignores it.
struct ExplicitMask {
  const uint8_t* data = nullptr;
  int64_t sb = 0, sn = 0, si = 0, sj = 0;
  bool masked(int64_t b, int64_t n, int64_t i, int64_t j) const { return data[b * sb + n * sn + i * si + j * sj] != 0; }
  // The same mask at the new address of attenMask's data; a mask the plan has none of (no attenMask,
  // or a mode that ignores it) stays absent.
  void bind(const void* new_data) {
    if (data != nullptr) data = static_cast<const uint8_t*>(new_data);
  }
};

struct Problem {
  Geometry g;
  Window window;
  ExplicitMask mask;
  float scale = 1.0f;  // the vendor takes scaleValue as float32
};

// The C ABI's scalar arguments as options (inputLayout copied; null: 161001 naming it, for `op`).
FlashAttentionOptions c_abi_options(const char* op, double scale_value, double keep_prob, int64_t pre_tokens,
                                    int64_t next_tokens, int64_t head_num, const char* input_layout,
                                    int64_t inner_precise, int64_t sparse_mode);

// The geometry of q, k, v under options (dtypes, ranks, shapes, head counts), 161002 otherwise.
Geometry check_inputs(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                      const FlashAttentionOptions& options);
// Attributes and the optional tensors: pse and a dropout (keepProb < 1) are refused, keepProb in (0, 1],
// sparseMode 0..4, the band of modes 0 / 4 non-empty, attenMask's dtype and shape for the mode.
Problem check_problem(const char* op, const Geometry& g, const TensorView& pse, const TensorView& drop_mask,
                      const TensorView& atten_mask, const FlashAttentionOptions& options);

// t (query, key, value or an output of their shapes) as [B, N, S, D] in the layout.
Heads heads_of(const TensorView& t, Layout layout, int64_t n);
// Shape of a tensor of the layout with n heads of dim d (the query's with D = Dv for attentionOut).
std::vector<int64_t> layout_shape(const Geometry& g, int64_t seq, int64_t n, int64_t d);

// Every output is free of self-overlap and overlaps no input and no other output (161002).
struct NamedView {
  const char* name;
  const TensorView* view;
};
void check_outputs_apart(const char* op, std::initializer_list<NamedView> outputs,
                         std::initializer_list<NamedView> inputs);

// softmaxMax / softmaxSum: float32 [B, N1, Sq, 8].
void check_stats(const char* op, const char* arg, const TensorView& t, const Geometry& g);

}  // namespace tilegrad::ops::fa
