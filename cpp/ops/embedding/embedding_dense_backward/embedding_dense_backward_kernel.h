// Embedding dense backward row kernel: writes output rows [r0, r1) once each, from the sorted
// gradient rows. Dtypes and layout come in EmbRowsArgs (filled by the launch from the tiling).
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct EmbRowsArgs {
  const char* grad = nullptr;  // grad element [0, ..., 0]
  int64_t grad_inner = 1;      // element stride of grad along D
  char* out = nullptr;         // out element [0, 0]
  int64_t out_row_bytes = 0;   // byte stride between output rows
  int64_t out_inner = 1;       // element stride of out along D
  int64_t dim = 0;             // D
  // Sorted gradient rows: row r sums grad + src[k] for k in [starts[r], starts[r + 1]), in that
  // order. starts == nullptr: every row is zero.
  const int64_t* starts = nullptr;
  const int64_t* src = nullptr;
  int64_t src_count = 0;           // entries in src (prefetch bound)
  int64_t padding = -1;            // row written as zero whatever hits it; -1: none
  bool scale = false;              // divide each row's sum by its count
  bool streaming_stores = false;   // non-temporal stores where aligned
  bool rows_packed = false;        // out rows are one contiguous block (zero runs merge)
  int64_t prefetch_row_bytes = 0;  // software prefetch of rows up to this size
  DType grad_dtype = DType::kFloat32, out_dtype = DType::kFloat32;
};

using EmbRowsFn = void (*)(const EmbRowsArgs& args, int64_t r0, int64_t r1);

void embedding_dense_backward_rows_scalar(const EmbRowsArgs&, int64_t, int64_t);
void embedding_dense_backward_rows_avx2(const EmbRowsArgs&, int64_t, int64_t);
void embedding_dense_backward_rows_avx512(const EmbRowsArgs&, int64_t, int64_t);

inline EmbRowsFn embedding_dense_backward_kernel(Isa isa) {
  return core::KernelTable<EmbRowsFn>{embedding_dense_backward_rows_scalar, embedding_dense_backward_rows_avx2,
                                      embedding_dense_backward_rows_avx512}
      .pick(isa);
}

}  // namespace tilegrad::ops
