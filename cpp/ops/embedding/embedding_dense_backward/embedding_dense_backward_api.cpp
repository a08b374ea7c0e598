// aclnnEmbeddingDenseBackward: validation (specification section 4), launch (counting sort of the
// indices, then every output row written once by the thread owning it), native C++ API and C ABI.
#include <algorithm>
#include <cstring>
#include <memory>

#include "aclnnop/aclnn_embedding_dense_backward.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_kernel.h"
#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_sort.h"
#include "ops/embedding/embedding_dense_backward/embedding_dense_backward_tiling.h"
#include "tilegrad/embedding_dense_backward.hpp"

namespace tilegrad::ops {
namespace {

constexpr const char* kOp = "aclnnEmbeddingDenseBackward";
constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
constexpr std::initializer_list<DType> kIndexTypes = {DType::kInt64, DType::kInt32,   DType::kInt16,
                                                      DType::kInt8,  DType::kUInt8,   DType::kBool,
                                                      DType::kFloat32, DType::kFloat16, DType::kFloat64};

int64_t leading_rows(const TensorView& grad) {
  int64_t n = 1;
  for (int i = 0; i + 1 < grad.rank(); ++i) n *= grad.shape[i];
  return n;
}

void check_leading(const TensorView& grad, const TensorView& indices) {
  core::check(leading_rows(grad) == indices.numel(), kOp, ": grad shape ", shape_str(grad.shape),
              " must have leading dims whose product equals numel(indices) = ", indices.numel(), " (indices shape ",
              shape_str(indices.shape), "), got ", leading_rows(grad));
}

OutputSpec validate_inputs(const TensorView& grad, const TensorView& indices, int64_t num_weights) {
  core::require_well_formed(kOp, "grad", grad);
  core::require_well_formed(kOp, "indices", indices);
  core::require_dtype(kOp, "grad", grad, kFloatTypes);
  core::require_dtype(kOp, "indices", indices, kIndexTypes);
  core::require_rank(kOp, "grad", grad, 2, kMaxDims);
  core::require_rank(kOp, "indices", indices, 1, kMaxDims);
  check_leading(grad, indices);
  core::check(num_weights >= 0, kOp, ": numWeights must be >= 0, got ", num_weights);
  return OutputSpec{grad.dtype, {num_weights, grad.shape.back()}};
}

// The rules that depend on addresses: out shares no memory with the inputs.
void check_overlaps(const TensorView& grad, const TensorView& indices, const TensorView& out) {
  core::require_no_partial_overlap(kOp, "out", out, "grad", grad, false);
  core::require_no_partial_overlap(kOp, "out", out, "indices", indices, false);
}

// numWeights as the C ABI passes it (uint64_t); out's first dim must equal it.
void validate(const TensorView& grad, const TensorView& indices, uint64_t num_weights, const TensorView& out) {
  core::require_well_formed(kOp, "grad", grad);
  core::require_well_formed(kOp, "indices", indices);
  core::require_well_formed(kOp, "out", out);
  core::require_dtype(kOp, "grad", grad, kFloatTypes);
  core::require_dtype(kOp, "indices", indices, kIndexTypes);
  core::require_dtype(kOp, "out", out, kFloatTypes);
  core::require_rank(kOp, "grad", grad, 2, kMaxDims);
  core::require_rank(kOp, "indices", indices, 1, kMaxDims);
  core::require_rank(kOp, "out", out, 2, 2);
  check_leading(grad, indices);
  const int64_t D = grad.shape.back();
  core::check(static_cast<uint64_t>(out.shape[0]) == num_weights && out.shape[1] == D, kOp, ": out shape ",
              shape_str(out.shape), " != [numWeights, grad last dim] = [", num_weights, ",", D, "]");
  core::require_no_self_overlap(kOp, "out", out);
  check_overlaps(grad, indices, out);
}

// A sort entry of the sparse path: positions are distinct, so the order is total (and stable).
struct RowAndPosition {
  int64_t row, position;
  bool operator<(const RowAndPosition& o) const { return row != o.row ? row < o.row : position < o.position; }
};

class EmbeddingDenseBackwardLaunch final : public core::Launch {
 public:
  EmbeddingDenseBackwardLaunch(const TensorView& grad, const TensorView& indices, uint64_t num_weights,
                               uint64_t padding_idx, bool scale, const TensorView& out) {
    validate(grad, indices, num_weights, out);
    const int64_t V = out.shape[0], D = out.shape[1], L = indices.numel();
    const int64_t ges = dtype_size(grad.dtype), oes = dtype_size(out.dtype);
    // paddingIdx carries a two's-complement int64: outside [0, V) means no padding row.
    const int64_t pad = static_cast<int64_t>(padding_idx);
    index_shape_ = indices.shape;
    index_.dtype = indices.dtype;
    index_.dims = collapse_dims(indices.shape.data(), indices.strides.data(), indices.rank(), dtype_size(indices.dtype));
    grad_rows_ = collapse_dims(grad.shape.data(), grad.strides.data(), grad.rank() - 1, ges);

    args_.grad_inner = D == 1 ? 1 : grad.strides.back();
    args_.out_inner = D == 1 ? 1 : out.strides[1];
    args_.out_row_bytes = V == 1 ? D * oes : out.strides[0] * oes;
    args_.dim = D;
    args_.padding = pad >= 0 && pad < V ? pad : -1;
    args_.scale = scale;
    args_.rows_packed = args_.out_inner == 1 && args_.out_row_bytes == D * oes;
    args_.grad_dtype = grad.dtype;
    args_.out_dtype = out.dtype;
    set_addresses(grad, indices, out);

    tiling_ = embedding_dense_backward_tiling(L, V, D, ges, oes, args_.rows_packed, core::Platform::current());
    args_.streaming_stores = tiling_.streaming_stores;
    args_.prefetch_row_bytes = tiling_.prefetch_row_bytes;
    kernel_ = embedding_dense_backward_kernel(tiling_.isa);
    trace_.record(kOp, {{"grad", &grad}, {"indices", &indices}, {"out", &out}}, tiling_);
  }

  uint64_t workspace_bytes() const override { return static_cast<uint64_t>(tiling_.workspace_bytes); }

  void bind(const core::Operands& t) override {
    const TensorView &grad = t["grad"], &indices = t["indices"], &out = t["out"];
    check_overlaps(grad, indices, out);
    set_addresses(grad, indices, out);
  }

  void run(void* workspace) override {
    const EmbeddingDenseBackwardTiling& t = tiling_;
    const int64_t L = t.num_indices, V = t.num_weights;
    if (t.empty) {
      if (L > 0) {
        const int64_t bad = convert_indices(index_, 0, L, V, nullptr, nullptr);
        if (bad >= 0) report_bad_index(bad);
      }
      EmbRowsArgs zero = args_;
      zero.starts = nullptr;
      const int A = t.accum_tiles;
      core::parallel_for(A, A, [&](int64_t tile) { kernel_(zero, V * tile / A, V * (tile + 1) / A); });
      return;
    }
    if (t.sparse) return run_sparse(static_cast<char*>(workspace));
    char* ws = static_cast<char*>(workspace);
    int64_t* keys = reinterpret_cast<int64_t*>(ws + t.keys_offset);
    int64_t* src = reinterpret_cast<int64_t*>(ws + t.src_offset);
    int64_t* starts = reinterpret_cast<int64_t*>(ws + t.starts_offset);
    int64_t* hist = reinterpret_cast<int64_t*>(ws + t.hist_offset);
    int64_t* scratch = reinterpret_cast<int64_t*>(ws + t.scratch_offset);
    const int S = t.sort_tiles, P = t.prefix_tiles, A = t.accum_tiles;

    // 1. Convert and check the indices, one histogram per sort tile. The lowest bad position wins.
    core::parallel_for(S, S, [&](int64_t c) {
      int64_t* h = hist + c * V;
      std::memset(h, 0, static_cast<size_t>(V) * sizeof(int64_t));
      const int64_t b = c * t.sort_chunk, e = std::min(L, b + t.sort_chunk);
      scratch[c] = convert_indices(index_, b, e, V, keys, h);
    });
    for (int c = 0; c < S; ++c)
      if (scratch[c] >= 0) report_bad_index(scratch[c]);

    // 2. Row starts (exclusive prefix of the counts) and each sort tile's scatter cursor per row.
    auto rows_of = [&](int64_t p) { return std::make_pair(p * t.prefix_chunk, std::min(V, (p + 1) * t.prefix_chunk)); };
    core::parallel_for(P, P, [&](int64_t p) {
      const auto [v0, v1] = rows_of(p);
      int64_t sum = 0;
      for (int c = 0; c < S; ++c)
        for (int64_t v = v0; v < v1; ++v) sum += hist[c * V + v];
      scratch[p] = sum;
    });
    int64_t running = 0;
    for (int p = 0; p < P; ++p) {
      const int64_t sum = scratch[p];
      scratch[p] = running;
      running += sum;
    }
    int64_t* max_count = scratch + std::max(S, P);
    core::parallel_for(P, P, [&](int64_t p) {
      const auto [v0, v1] = rows_of(p);
      int64_t at = scratch[p], most = 0;
      for (int64_t v = v0; v < v1; ++v) {
        starts[v] = at;
        const int64_t first = at;
        for (int c = 0; c < S; ++c) {
          const int64_t n = hist[c * V + v];
          hist[c * V + v] = at;
          at += n;
        }
        if (v != args_.padding) most = std::max(most, at - first);
      }
      max_count[p] = most;
    });
    starts[V] = L;

    // 3. Stable scatter of the gradient row offsets.
    core::parallel_for(S, S, [&](int64_t c) {
      const int64_t b = c * t.sort_chunk, e = std::min(L, b + t.sort_chunk);
      scatter_rows(keys, b, e, grad_rows_, hist + c * V, src);
    });

    // 4. Output rows split into A ranges of equal cost (depends on the data, never the result), or,
    //    when one row outweighs a range, column stripes of all rows.
    EmbRowsArgs args = args_;
    args.starts = starts;
    args.src = src;
    args.src_count = L;
    const double total = cost(starts, V);
    const int64_t heaviest = *std::max_element(max_count, max_count + P);
    const int64_t D = t.dim, q = t.column_quantum;
    if (A > 1 && D >= 2 * q && static_cast<double>(heaviest) * t.grad_row_cost * A > total) {
      int64_t* cols = max_count + P;  // C + 1 column bounds
      const int C = static_cast<int>(std::min<int64_t>(A, D / q));
      // Stripe bounds on 64-byte-aligned output addresses when every row has the same alignment.
      const int64_t oes = dtype_size(args.out_dtype), ges = dtype_size(args.grad_dtype);
      const int64_t lead = args.out_inner == 1 && args.out_row_bytes % 64 == 0
                               ? static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(args.out) % 64) % 64) / oes
                               : 0;
      cols[0] = 0;
      for (int c = 1; c < C; ++c) {
        const int64_t nominal = D * c / C;
        cols[c] = std::max(cols[c - 1], lead + std::max<int64_t>(0, nominal - lead) / q * q);
      }
      cols[C] = D;
      core::parallel_for(C, C, [&](int64_t c) {
        EmbRowsArgs stripe = args;
        stripe.grad += cols[c] * args.grad_inner * ges;
        stripe.out += cols[c] * args.out_inner * oes;
        stripe.dim = cols[c + 1] - cols[c];
        stripe.rows_packed = stripe.dim == D && args.rows_packed;
        kernel_(stripe, 0, V);
      });
      return;
    }
    int64_t* bounds = max_count + P;
    bounds[0] = 0;
    for (int a = 1; a < A; ++a) {
      const double target = total * a / A;
      int64_t lo = bounds[a - 1], hi = V;  // first row whose cost prefix reaches the target
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cost(starts, mid) < target)
          lo = mid + 1;
        else
          hi = mid;
      }
      bounds[a] = lo;
    }
    bounds[A] = V;
    core::parallel_for(A, A, [&](int64_t a) { kernel_(args, bounds[a], bounds[a + 1]); });
  }

 private:
  void set_addresses(const TensorView& grad, const TensorView& indices, const TensorView& out) {
    index_.data = static_cast<const char*>(indices.data);
    args_.grad = static_cast<const char*>(grad.data);
    args_.out = static_cast<char*>(out.data);
  }

  // Rows far outnumber indices: sort (row, position) pairs (O(L log L), workspace O(L)) instead of
  // counting rows. The sorted order is the counting sort's (by row, index order within a row) and
  // each row is summed by the same kernel, so the bits are the same as the dense path's.
  void run_sparse(char* ws) {
    const EmbeddingDenseBackwardTiling& t = tiling_;
    const int64_t L = t.num_indices, V = t.num_weights;
    int64_t* keys = reinterpret_cast<int64_t*>(ws + t.keys_offset);
    int64_t* src = reinterpret_cast<int64_t*>(ws + t.src_offset);
    auto* pairs = reinterpret_cast<RowAndPosition*>(ws + t.pairs_offset);
    int64_t* scratch = reinterpret_cast<int64_t*>(ws + t.scratch_offset);
    const int S = t.sort_tiles, A = t.accum_tiles;

    // 1. Convert and check the indices (the lowest bad position wins), then sort by (row, position).
    core::parallel_for(S, S, [&](int64_t c) {
      const int64_t b = c * t.sort_chunk, e = std::min(L, b + t.sort_chunk);
      scratch[c] = convert_indices(index_, b, e, V, keys, nullptr);
    });
    for (int c = 0; c < S; ++c)
      if (scratch[c] >= 0) report_bad_index(scratch[c]);
    for (int64_t i = 0; i < L; ++i) pairs[i] = RowAndPosition{keys[i], i};
    std::sort(pairs, pairs + L);
    for (int64_t i = 0; i < L; ++i) {
      keys[i] = pairs[i].row;
      src[i] = offset_of(grad_rows_, pairs[i].position);
    }

    // 2. Output rows split into A ranges of equal cost; each tile zeroes its untouched runs and sums
    //    its touched rows one at a time.
    const auto entries_before = [&](int64_t r) { return std::lower_bound(keys, keys + L, r) - keys; };
    const auto cost_before = [&](int64_t r) {
      return static_cast<double>(entries_before(r)) * static_cast<double>(t.grad_row_cost) +
             static_cast<double>(r) * static_cast<double>(t.out_row_cost);
    };
    const double total = cost_before(V);
    int64_t* bounds = scratch + S;
    bounds[0] = 0;
    for (int a = 1; a < A; ++a) {
      const double target = total * a / A;
      int64_t lo = bounds[a - 1], hi = V;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cost_before(mid) < target)
          lo = mid + 1;
        else
          hi = mid;
      }
      bounds[a] = lo;
    }
    bounds[A] = V;
    core::parallel_for(A, A, [&](int64_t a) {
      const int64_t r1 = bounds[a + 1];
      int64_t r = bounds[a], i = entries_before(r);
      EmbRowsArgs zero = args_;
      zero.starts = nullptr;
      while (r < r1) {
        const int64_t row = i < L ? std::min(keys[i], r1) : r1;
        if (row > r) kernel_(zero, r, row);  // untouched rows [r, row)
        if (row == r1) break;
        int64_t j = i;
        while (j < L && keys[j] == row) ++j;
        // One row through the dense kernel: starts {i, j} for local row 0 at the row's address.
        const int64_t starts[2] = {i, j};
        EmbRowsArgs one = args_;
        one.out += row * args_.out_row_bytes;
        one.starts = starts;
        one.src = src;
        one.src_count = L;
        one.padding = row == args_.padding ? 0 : -1;
        kernel_(one, 0, 1);
        r = row + 1;
        i = j;
      }
    });
  }

  // Cost of output rows [0, r): gradient rows read plus output rows written.
  double cost(const int64_t* starts, int64_t r) const {
    return static_cast<double>(starts[r]) * static_cast<double>(tiling_.grad_row_cost) +
           static_cast<double>(r) * static_cast<double>(tiling_.out_row_cost);
  }

  [[noreturn]] void report_bad_index(int64_t pos) const {
    std::string where = "[";
    int64_t rem = pos;
    std::vector<int64_t> idx(index_shape_.size());
    for (int k = static_cast<int>(index_shape_.size()) - 1; k >= 0; --k) {
      idx[k] = rem % index_shape_[k];
      rem /= index_shape_[k];
    }
    for (size_t k = 0; k < idx.size(); ++k) where += (k ? "," : "") + std::to_string(idx[k]);
    where += "]";
    if (index_shape_.size() > 1) where += " (flat position " + std::to_string(pos) + ")";
    core::fail_index(kOp, ": indices", where, " must be in [0, numWeights) = [0, ", tiling_.num_weights, "), got ",
                     index_value_str(index_, pos));
  }

  std::vector<int64_t> index_shape_;
  IndexSource index_;
  StridedDims grad_rows_;
  EmbRowsArgs args_;
  EmbeddingDenseBackwardTiling tiling_;
  EmbRowsFn kernel_ = nullptr;
};

}  // namespace
}  // namespace tilegrad::ops

namespace tilegrad {

OutputSpec embedding_dense_backward_output_spec(const TensorView& grad, const TensorView& indices,
                                                int64_t num_weights) {
  return ops::validate_inputs(grad, indices, num_weights);
}

void embedding_dense_backward(const TensorView& grad, const TensorView& indices, int64_t num_weights,
                              int64_t padding_idx, bool scale_grad_by_freq, const TensorView& out) {
  core::check(num_weights >= 0, ops::kOp, ": numWeights must be >= 0, got ", num_weights);
  ops::EmbeddingDenseBackwardLaunch launch(grad, indices, static_cast<uint64_t>(num_weights),
                                           static_cast<uint64_t>(padding_idx), scale_grad_by_freq, out);
  core::run_now(ops::kOp, launch);
}

}  // namespace tilegrad

using namespace tilegrad;

extern "C" aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(const aclTensor* grad, const aclTensor* indices,
                                                                  uint64_t numWeights, uint64_t paddingIdx,
                                                                  bool scaleGradByFreq, const aclTensor* out,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return core::create_executor(ops::kOp, {{"grad", "indices"}, {"out"}}, workspaceSize, executor,
                               [&](core::ExecutorTensors& t) {
    core::require_not_null(ops::kOp, "grad", grad);
    core::require_not_null(ops::kOp, "indices", indices);
    core::require_not_null(ops::kOp, "out", out);
    return std::make_unique<ops::EmbeddingDenseBackwardLaunch>(t.view("grad", grad), t.view("indices", indices),
                                                               numWeights, paddingIdx, scaleGradByFreq,
                                                               t.view("out", out));
  });
}

extern "C" aclnnStatus aclnnEmbeddingDenseBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                  aclrtStream) {
  return core::launch_executor(ops::kOp, workspace, workspaceSize, executor);
}
