#include "ops/loss/cross_entropy/cross_entropy_loss_tiling.h"

#include <algorithm>

#include "core/tiling.h"

namespace tilegrad::ops {

CrossEntropyLossTiling cross_entropy_loss_tiling(int64_t rows, int64_t cols, int64_t in_elem_bytes,
                                                 int64_t out_elem_bytes, bool out_contiguous,
                                                 const core::Platform& p) {
  constexpr int64_t kAlign = 64;
  CrossEntropyLossTiling t;
  t.rows = rows;
  t.cols = cols;
  t.isa = p.isa;
  if (rows <= 0) return t;
  // Statistics chunk: half of L2 holds the chunk between the max pass and the exp pass.
  const int64_t fit = std::max<int64_t>(kAlign, p.l2_bytes / 2 / std::max<int64_t>(in_elem_bytes, 1) / kAlign * kAlign);
  t.chunk_cols = std::max<int64_t>(1, std::min(cols, fit));
  t.num_chunks = cols == 0 ? 0 : (cols + t.chunk_cols - 1) / t.chunk_cols;
  const int64_t numel = rows * std::max<int64_t>(cols, 1);
  const int64_t threads = std::min(core::useful_threads(numel, p), rows);
  t.rows_per_tile = (rows + threads - 1) / threads;
  t.num_tiles = static_cast<int>((rows + t.rows_per_tile - 1) / t.rows_per_tile);
  t.streaming_stores = out_contiguous && rows * cols * (in_elem_bytes + out_elem_bytes) > p.l3_bytes;
  return t;
}

void CrossEntropyLossTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"rows", rows}, {"cols", cols}, {"num_tiles", num_tiles}, {"rows_per_tile", rows_per_tile},
            {"chunk_cols", chunk_cols}, {"num_chunks", num_chunks}, {"streaming_stores", streaming_stores},
            {"isa", isa}});
}

}  // namespace tilegrad::ops
