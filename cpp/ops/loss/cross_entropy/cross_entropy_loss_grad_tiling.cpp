#include "ops/loss/cross_entropy/cross_entropy_loss_grad_tiling.h"

#include <algorithm>

#include "core/tiling.h"

namespace tilegrad::ops {

CrossEntropyLossGradTiling cross_entropy_loss_grad_tiling(int64_t rows, int64_t cols, int64_t bytes_per_elem,
                                                          bool out_contiguous, const core::Platform& p) {
  constexpr int64_t kAlign = 64;
  CrossEntropyLossGradTiling t;
  t.rows = rows;
  t.cols = cols;
  t.isa = p.isa;
  const int64_t numel = rows * cols;
  if (numel <= 0) return t;
  const int64_t threads = core::useful_threads(numel, p);
  if (rows >= threads) {
    t.rows_per_tile = (rows + threads - 1) / threads;
    t.col_chunks = 1;
    t.chunk_cols = cols;
  } else {
    // Few long rows: split the columns too (each element's math does not depend on the split).
    t.rows_per_tile = 1;
    const int64_t want = threads / rows;  // chunks per row; tiles never exceed threads
    int64_t chunk = (cols + want - 1) / want;
    chunk = (chunk + kAlign - 1) / kAlign * kAlign;
    t.chunk_cols = std::min(chunk, cols);
    t.col_chunks = (cols + t.chunk_cols - 1) / t.chunk_cols;
  }
  const int64_t row_blocks = (rows + t.rows_per_tile - 1) / t.rows_per_tile;
  t.num_tiles = static_cast<int>(row_blocks * t.col_chunks);
  // Streaming stores pay off once the data cannot stay in the last-level cache anyway.
  t.streaming_stores = out_contiguous && numel * bytes_per_elem > p.l3_bytes;
  return t;
}

void CrossEntropyLossGradTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"rows", rows}, {"cols", cols}, {"num_tiles", num_tiles}, {"rows_per_tile", rows_per_tile},
            {"col_chunks", col_chunks}, {"chunk_cols", chunk_cols}, {"streaming_stores", streaming_stores},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
