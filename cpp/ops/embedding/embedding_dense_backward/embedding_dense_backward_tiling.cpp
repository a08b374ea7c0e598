#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_tiling.h"

#include <algorithm>

#include "core/workspace.h"

namespace tilegrad::ops {
namespace {

// Below these amounts of work per thread, waking another thread costs more than it saves.
constexpr int64_t kMinIndicesPerSortTile = 8192;
constexpr int64_t kMinRowsPerPrefixTile = 16384;
constexpr int64_t kMinBytesPerAccumTile = 256 << 10;
constexpr const char* kOp = "aclnnEmbeddingDenseBackward";

int tiles_for(int64_t work, int64_t min_per_tile, int threads) {
  return static_cast<int>(std::clamp<int64_t>(work / min_per_tile, 1, std::max(threads, 1)));
}

}  // namespace

EmbeddingDenseBackwardTiling embedding_dense_backward_tiling(int64_t num_indices, int64_t num_weights, int64_t dim,
                                                             int64_t grad_elem, int64_t out_elem,
                                                             bool out_rows_packed, const core::Platform& platform) {
  EmbeddingDenseBackwardTiling t;
  t.num_indices = std::max<int64_t>(num_indices, 0);
  t.num_weights = std::max<int64_t>(num_weights, 0);
  t.dim = std::max<int64_t>(dim, 0);
  t.isa = platform.isa;
  t.grad_row_cost = core::checked_mul(kOp, "grad row bytes", t.dim, grad_elem);
  t.out_row_cost = core::checked_mul(kOp, "out row bytes", t.dim, out_elem);
  const int threads = std::max(platform.threads, 1);
  const int64_t out_bytes = core::checked_mul(kOp, "out bytes", t.num_weights, t.out_row_cost);
  // Non-temporal stores pay once the output cannot stay in the last-level cache anyway (measured:
  // 2x faster for a 524 MB output, 1.5x slower for an 8 MB one).
  t.streaming_stores = out_rows_packed && out_bytes > platform.l3_bytes;
  t.empty = t.num_indices == 0 || out_bytes == 0;
  if (t.empty) {
    // Only a zero fill (and, with indices but no output elements, a serial index check).
    t.accum_tiles = out_bytes > 0 ? tiles_for(out_bytes, kMinBytesPerAccumTile, threads) : 0;
    return t;
  }

  const int64_t L = t.num_indices, V = t.num_weights;
  t.sparse = V / kSparseRowsPerIndex > L;
  // Each sort tile keeps a V-row histogram: more tiles only pay while L dominates V.
  t.sort_tiles = tiles_for(L, kMinIndicesPerSortTile, threads);
  if (!t.sparse)
    t.sort_tiles = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(t.sort_tiles, 1 + L / std::max<int64_t>(V, 1))));
  t.sort_chunk = (L + t.sort_tiles - 1) / t.sort_tiles;
  t.sort_tiles = static_cast<int>((L + t.sort_chunk - 1) / t.sort_chunk);
  t.prefix_tiles = t.sparse ? 0 : tiles_for(V, kMinRowsPerPrefixTile, threads);
  t.prefix_chunk = t.sparse ? 0 : (V + t.prefix_tiles - 1) / t.prefix_tiles;
  if (!t.sparse) t.prefix_tiles = static_cast<int>((V + t.prefix_chunk - 1) / t.prefix_chunk);

  const int64_t total_bytes =
      core::checked_add(kOp, "bytes moved", core::checked_mul(kOp, "grad bytes", L, t.grad_row_cost), out_bytes);
  t.accum_tiles = tiles_for(total_bytes, kMinBytesPerAccumTile, threads);
  t.accum_tiles = static_cast<int>(std::min<int64_t>(t.accum_tiles, V));
  t.prefetch_row_bytes = 1024;
  t.column_quantum = 64;

  core::WorkspaceLayout ws(kOp);
  t.keys_offset = ws.take("workspace keys", L, 8);
  t.src_offset = ws.take("workspace row offsets", L, 8);
  if (t.sparse) {
    t.pairs_offset = ws.take("workspace sort pairs", L, 16);
  } else {
    t.starts_offset = ws.take("workspace row starts", core::checked_add(kOp, "workspace row starts", V, 1), 8);
    t.hist_offset = ws.take("workspace histograms", core::checked_mul(kOp, "workspace histograms", t.sort_tiles, V), 8);
  }
  t.scratch_offset = ws.take("workspace scratch", std::max(t.sort_tiles, t.prefix_tiles) + t.prefix_tiles + t.accum_tiles + 1, 8);
  t.workspace_bytes = ws.bytes();
  return t;
}

void EmbeddingDenseBackwardTiling::describe(core::FieldVisitor& v) const {
  v.fields({{"num_indices", num_indices}, {"num_weights", num_weights}, {"dim", dim}, {"empty", empty},
            {"sparse", sparse}, {"sort_tiles", sort_tiles}, {"sort_chunk", sort_chunk},
            {"prefix_tiles", prefix_tiles}, {"prefix_chunk", prefix_chunk}, {"accum_tiles", accum_tiles},
            {"grad_row_cost", grad_row_cost}, {"out_row_cost", out_row_cost},
            {"prefetch_row_bytes", prefetch_row_bytes}, {"streaming_stores", streaming_stores},
            {"column_quantum", column_quantum}, {"keys_offset", keys_offset}, {"src_offset", src_offset},
            {"starts_offset", starts_offset}, {"hist_offset", hist_offset}, {"scratch_offset", scratch_offset},
            {"pairs_offset", pairs_offset}, {"workspace_bytes", workspace_bytes}, {"isa", isa}});
}

}  // namespace tilegrad::ops
