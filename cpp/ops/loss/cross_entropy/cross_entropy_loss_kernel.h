// Cross-entropy forward kernels over one contiguous chunk of one row:
//   stats:    max_j x_j, sum_j exp(x_j - max) (0 when max = -inf), and optionally sum_j w_j x_j;
//   log_prob: out_j = x_j - lse, rounded once to the dtype.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct CeRowStats {
  float max = 0, sum_exp = 0, sum_wx = 0;
};

// w: weights of the chunk's columns (contiguous) or null for ones; sum_wx only when want_wx.
// next / next_n: the chunk processed after this one (null when unknown); its first min(n, next_n)
// elements are prefetched into L2 during the exp pass, so the next max pass finds them there and the
// memory reads overlap the exp work.
struct CeStatsArgs {
  const char* x = nullptr;
  int64_t n = 0;
  const float* w = nullptr;
  bool want_wx = false;
  const char* next = nullptr;
  int64_t next_n = 0;
  // Optional side work: logProb of another row of the same length n (write_out = write_in - write_lse),
  // written during this chunk's exp pass so that its memory writes overlap the exp work.
  const char* write_in = nullptr;
  char* write_out = nullptr;
  float write_lse = 0;
  bool write_stream = false;
};
using CeStatsFn = CeRowStats (*)(DType dtype, const CeStatsArgs& args);
using CeLogProbFn = void (*)(DType dtype, const char* x, char* out, int64_t n, float lse, bool streaming_stores);

CeRowStats cross_entropy_loss_stats_scalar(DType, const CeStatsArgs&);
CeRowStats cross_entropy_loss_stats_avx2(DType, const CeStatsArgs&);
CeRowStats cross_entropy_loss_stats_avx512(DType, const CeStatsArgs&);
void cross_entropy_loss_log_prob_scalar(DType, const char*, char*, int64_t, float, bool);
void cross_entropy_loss_log_prob_avx2(DType, const char*, char*, int64_t, float, bool);
void cross_entropy_loss_log_prob_avx512(DType, const char*, char*, int64_t, float, bool);

inline CeStatsFn cross_entropy_loss_stats_kernel(Isa isa) {
  return core::KernelTable<CeStatsFn>{cross_entropy_loss_stats_scalar, cross_entropy_loss_stats_avx2,
                                      cross_entropy_loss_stats_avx512}
      .pick(isa);
}
inline CeLogProbFn cross_entropy_loss_log_prob_kernel(Isa isa) {
  return core::KernelTable<CeLogProbFn>{cross_entropy_loss_log_prob_scalar, cross_entropy_loss_log_prob_avx2,
                                        cross_entropy_loss_log_prob_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
