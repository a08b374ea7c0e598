// oneDNN matmul wrapper (see gemm.h).
#include "core/gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/trace.h"
#include "core/workspace.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tilegrad::core {
namespace {

dnnl::memory::data_type dnnl_type(DType d) {
  switch (d) {
    case DType::kFloat32: return dnnl::memory::data_type::f32;
    case DType::kFloat16: return dnnl::memory::data_type::f16;
    case DType::kBFloat16: return dnnl::memory::data_type::bf16;
    default: fail(Status::kInner, "gemm: unsupported dtype ", dtype_name(d));
  }
}

// Strides of a size-1 dimension do not matter; give them the value that makes the layout plain.
void normalized_strides(const GemmMatrix& m, int64_t* rs, int64_t* cs) {
  *rs = m.row_stride;
  *cs = m.col_stride;
  if (m.rows <= 1 && m.cols <= 1) {
    *rs = 1;
    *cs = 1;
  } else if (m.rows <= 1) {
    if (*cs == 1) *rs = m.cols;
  } else if (m.cols <= 1) {
    if (*rs == 1) *cs = m.rows;
    else *cs = 1;
  }
}

struct Key {
  int64_t m, n, k;
  int64_t ars, acs, brs, bcs, crs, ccs;
  int at, ct, acc, threads;
  bool operator==(const Key& o) const {
    return std::tie(m, n, k, ars, acs, brs, bcs, crs, ccs, at, ct, acc, threads) ==
           std::tie(o.m, o.n, o.k, o.ars, o.acs, o.brs, o.bcs, o.crs, o.ccs, o.at, o.ct, o.acc, o.threads);
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    const int64_t v[] = {k.m, k.n, k.k, k.ars, k.acs, k.brs, k.bcs, k.crs, k.ccs, k.at, k.ct, k.acc, k.threads};
    for (int64_t x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

struct Entry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory::desc a_md, b_md, c_md;
  size_t scratch_bytes = 0;
};

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

std::mutex g_cache_mutex;
std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash> g_cache;
constexpr size_t kMaxCacheEntries = 1024;

// oneDNN (GNU OpenMP build) uses the calling thread's omp_get_max_threads(); set it for the call.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(omp_get_max_threads()) {
    if (threads >= 1 && threads != saved_) omp_set_num_threads(threads);
  }
  ~ThreadScope() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }

 private:
  int saved_;
};

Key make_key(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate, int threads) {
  Key k{};
  k.m = a.rows;
  k.k = a.cols;
  k.n = b.cols;
  normalized_strides(a, &k.ars, &k.acs);
  normalized_strides(b, &k.brs, &k.bcs);
  normalized_strides(c, &k.crs, &k.ccs);
  k.at = static_cast<int>(a.dtype);
  k.ct = static_cast<int>(c.dtype);
  k.acc = accumulate ? 1 : 0;
  k.threads = threads;
  return k;
}

std::shared_ptr<Entry> get_entry(const Key& k, const GemmMatrix& a, const GemmMatrix& c) {
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(k);
    if (it != g_cache.end()) return it->second;
  }
  using dims = dnnl::memory::dims;
  auto e = std::make_shared<Entry>();
  e->a_md = dnnl::memory::desc(dims{k.m, k.k}, dnnl_type(a.dtype), dims{k.ars, k.acs});
  e->b_md = dnnl::memory::desc(dims{k.k, k.n}, dnnl_type(a.dtype), dims{k.brs, k.bcs});
  e->c_md = dnnl::memory::desc(dims{k.m, k.n}, dnnl_type(c.dtype), dims{k.crs, k.ccs});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.acc) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  e->pd = dnnl::matmul::primitive_desc(engine(), e->a_md, e->b_md, e->c_md, attr);
  e->prim = dnnl::matmul(e->pd);
  e->scratch_bytes = e->pd.scratchpad_desc().get_size();
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  if (g_cache.size() >= kMaxCacheEntries) g_cache.clear();
  return g_cache.emplace(k, e).first->second;
}

void check_shapes(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c) {
  if (a.cols != b.rows || c.rows != a.rows || c.cols != b.cols || a.dtype != b.dtype)
    fail(Status::kInner, "gemm: inconsistent operands [", a.rows, ",", a.cols, "] @ [", b.rows, ",", b.cols,
         "] -> [", c.rows, ",", c.cols, "]");
}

void zero_fill(const GemmMatrix& c) {
  const int64_t es = dtype_size(c.dtype);
  char* base = static_cast<char*>(c.data);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.cols; ++j) std::memset(base + (r * c.row_stride + j * c.col_stride) * es, 0, es);
}

struct ScratchBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~ScratchBuffer() { std::free(ptr); }
  // Large scratchpads (e.g. a packed copy of a big operand) are not kept between calls.
  void trim() {
    if (bytes > (size_t(8) << 20)) {
      std::free(ptr);
      ptr = nullptr;
      bytes = 0;
    }
  }
  void* get(size_t n) {
    if (n > bytes) {
      std::free(ptr);
      ptr = alloc_aligned(n);
      if (!ptr) {
        bytes = 0;
        throw std::bad_alloc();
      }
      bytes = n;
    }
    return ptr;
  }
};

ScratchBuffer& thread_scratch() {
  thread_local ScratchBuffer scratch;
  return scratch;
}

// oneDNN has no matmul for a 16-bit type the CPU (or ONEDNN_MAX_CPU_ISA) lacks: fp16 without
// AVX512-FP16 / AMX-FP16 (e.g. AMD Zen 4), bf16 below AVX-512 (AVX2-only CPUs). Probed once each.
bool probe_matmul(dnnl::memory::data_type dt) {
  try {
    using dims = dnnl::memory::dims;
    dnnl::memory::desc a(dims{16, 16}, dt, dims{16, 1}), c(dims{16, 16}, dnnl::memory::data_type::f32, dims{16, 1});
    dnnl::matmul::primitive_desc pd(engine(), a, a, c);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool native_matmul(DType dt) {
  static const bool f16 = probe_matmul(dnnl::memory::data_type::f16);
  static const bool bf16 = probe_matmul(dnnl::memory::data_type::bf16);
  if (dt == DType::kFloat16) return f16;
  if (dt == DType::kBFloat16) return bf16;
  return true;
}

// Row-major fp32 copy (ld = cols) of a strided fp16 / bf16 matrix; both widen to fp32 exactly.
void widen_half(const GemmMatrix& m, float* dst, int threads) {
  const uint16_t* src = static_cast<const uint16_t*>(m.data);
  const bool bf16 = m.dtype == DType::kBFloat16;
  parallel_for(m.rows, threads, [&](int64_t r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const uint16_t v = src[r * m.row_stride + c * m.col_stride];
      dst[r * m.cols + c] = bf16 ? bf16_to_f32(v) : f16_to_f32(v);
    }
  });
}

struct F32Buffers {
  std::vector<float> a, b, c;
};

// oneDNN's brgemm matmul takes C only when it is dense (leading dimension == its extent): a column
// block of a wider C (ld > cols) makes it fall back to gemm:jit, which is slower and packs its
// operands in buffers it mallocs on every call, outside our workspace accounting (glibc then keeps
// them resident: ~45 MB after one bf16 forward at 1024 x 2048 x 32000). Such blocks run into a dense
// per-thread buffer instead, in row slices of at most kDenseSliceBytes (the constant each thread
// holds; a slice's oneDNN call re-packs its B panel, 1/rows of its work).
constexpr int64_t kDenseSliceBytes = int64_t(4) << 20;

bool dense(const GemmMatrix& c) {
  int64_t rs, cs;
  normalized_strides(c, &rs, &cs);
  return (cs == 1 && rs == std::max<int64_t>(c.cols, 1)) || (rs == 1 && cs == std::max<int64_t>(c.rows, 1));
}

// dst = src, element by element (same shape and dtype, any strides).
void copy_matrix(const GemmMatrix& src, const GemmMatrix& dst) {
  const int64_t es = dtype_size(src.dtype);
  const char* s = static_cast<const char*>(src.data);
  char* d = static_cast<char*>(dst.data);
  for (int64_t r = 0; r < src.rows; ++r) {
    if (src.col_stride == 1 && dst.col_stride == 1) {
      std::memcpy(d + r * dst.row_stride * es, s + r * src.row_stride * es, src.cols * es);
      continue;
    }
    for (int64_t j = 0; j < src.cols; ++j)
      std::memcpy(d + (r * dst.row_stride + j * dst.col_stride) * es, s + (r * src.row_stride + j * src.col_stride) * es,
                  es);
  }
}

ScratchBuffer& thread_dense_c() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// One block of gemm(): a single-threaded oneDNN call on C itself when it is dense, else on dense row
// slices (sizes from the block's shape only, so the bits still never depend on the thread count).
void gemm_block(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate) {
  if (dense(c) || !native_matmul(a.dtype)) return gemm_plain(a, b, c, accumulate, 1);
  const int64_t es = dtype_size(c.dtype);
  const int64_t slice = std::max<int64_t>(1, std::min(c.rows, kDenseSliceBytes / std::max<int64_t>(1, c.cols * es)));
  void* tmp = thread_dense_c().get(size_t(slice * c.cols * es));
  for (int64_t r0 = 0; r0 < c.rows; r0 += slice) {
    const int64_t rn = std::min(slice, c.rows - r0);
    const GemmMatrix part = c.row_block(r0, rn);
    const GemmMatrix tile = GemmMatrix::rowmajor(tmp, c.dtype, rn, c.cols, c.cols);
    if (accumulate) copy_matrix(part, tile);
    gemm_plain(a.row_block(r0, rn), b, tile, accumulate, 1);
    copy_matrix(tile, part);
  }
}

}  // namespace

void trim_scratch(int threads) {
  thread_scratch().trim();
  if (threads > 1 && !in_parallel_region()) parallel_for(threads, threads, [](int64_t) { thread_scratch().trim(); });
}

bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  GemmMatrix m(nullptr, DType::kFloat32, rows, cols, row_stride, col_stride);
  int64_t rs, cs;
  normalized_strides(m, &rs, &cs);
  if (rows <= 1 && cols <= 1) return true;
  if (cs == 1) return rs >= std::max<int64_t>(cols, 1);
  if (rs == 1) return cs >= std::max<int64_t>(rows, 1);
  return false;
}

void gemm_plain(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate, int threads) {
  check_shapes(a, b, c);
  if (c.rows == 0 || c.cols == 0) return;
  if (a.cols == 0) {
    if (!accumulate) zero_fill(c);
    return;
  }
  if (!native_matmul(a.dtype)) {
    // Same math (16-bit inputs are exact in fp32, fp32 accumulation): an fp32 matmul on widened copies.
    thread_local F32Buffers buf;
    buf.a.resize(a.rows * a.cols);
    buf.b.resize(b.rows * b.cols);
    widen_half(a, buf.a.data(), threads);
    widen_half(b, buf.b.data(), threads);
    const GemmMatrix a32 = GemmMatrix::rowmajor(buf.a.data(), DType::kFloat32, a.rows, a.cols, a.cols);
    const GemmMatrix b32 = GemmMatrix::rowmajor(buf.b.data(), DType::kFloat32, b.rows, b.cols, b.cols);
    if (c.dtype == DType::kFloat32) return gemm_plain(a32, b32, c, accumulate, threads);
    buf.c.resize(c.rows * c.cols);
    if (accumulate) widen_half(c, buf.c.data(), threads);
    gemm_plain(a32, b32, GemmMatrix::rowmajor(buf.c.data(), DType::kFloat32, c.rows, c.cols, c.cols), accumulate,
               threads);
    uint16_t* dst = static_cast<uint16_t*>(c.data);
    const float* src = buf.c.data();
    const bool bf16 = c.dtype == DType::kBFloat16;
    parallel_for(c.rows, threads, [&](int64_t r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        const float v = src[r * c.cols + j];
        dst[r * c.row_stride + j * c.col_stride] = bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      }
    });
    return;
  }
  ThreadScope scope(threads);
  const Key k = make_key(a, b, c, accumulate, threads);
  std::shared_ptr<Entry> e;
  try {
    e = get_entry(k, a, c);
  } catch (const dnnl::error& err) {
    fail(Status::kInner, "gemm: oneDNN could not create a matmul: ", err.what());
  }
  ScratchBuffer& scratch = thread_scratch();
  try {
    dnnl::engine& eng = engine();
    dnnl::stream strm(eng);
    dnnl::memory am(e->a_md, eng, a.data), bm(e->b_md, eng, b.data), cm(e->c_md, eng, c.data);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    if (e->scratch_bytes)
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e->pd.scratchpad_desc(), eng, scratch.get(e->scratch_bytes)));
    e->prim.execute(strm, args);
    strm.wait();
  } catch (const dnnl::error& err) {
    fail(Status::kInner, "gemm: oneDNN matmul failed: ", err.what());
  }
}

GemmBlocks gemm_blocks(int64_t m, int64_t n, int64_t k) {
  GemmBlocks g{std::max<int64_t>(m, 1), std::max<int64_t>(n, 1), 1, 1};
  if (m <= 0 || n <= 0) return g;
  // About one block per kGemmBlockWork multiply-adds, at most kGemmMaxBlocks blocks, none smaller
  // than kGemmMinBlock in a dimension that has that many: enough blocks to balance 2..8 threads,
  // each large enough that oneDNN's per-call packing stays a few percent of its work.
  const double work = double(m) * double(n) * double(std::max<int64_t>(k, 1));
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>(kGemmMaxBlocks, int64_t(work / kGemmBlockWork)));
  int64_t gm = 1, gn = 1;
  const auto size = [](int64_t dim, int64_t parts) { return (dim + parts - 1) / parts; };
  while (gm * gn < want) {
    const int64_t bm = size(m, gm), bn = size(n, gn);
    const bool can_m = bm >= 2 * kGemmMinBlock, can_n = bn >= 2 * kGemmMinBlock;
    if (!can_m && !can_n) break;
    // Split the longer side: keeps blocks square-ish, so both operands are re-read least.
    if (can_n && (!can_m || bn >= bm)) ++gn;
    else ++gm;
  }
  const auto round16 = [](int64_t x) { return (x + 15) / 16 * 16; };
  g.block_rows = gm > 1 ? std::min(m, round16(size(m, gm))) : m;
  g.block_cols = gn > 1 ? std::min(n, round16(size(n, gn))) : n;
  g.grid_rows = size(m, g.block_rows);
  g.grid_cols = size(n, g.block_cols);
  return g;
}

void gemm(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate, int threads) {
  check_shapes(a, b, c);
  if (c.rows == 0 || c.cols == 0) return;
  const GemmBlocks g = gemm_blocks(c.rows, c.cols, a.cols);
  const int64_t count = g.grid_rows * g.grid_cols;
  const auto block = [&](int64_t idx) {
    const int64_t bi = idx / g.grid_cols, bj = idx % g.grid_cols;
    const int64_t r0 = bi * g.block_rows, c0 = bj * g.block_cols;
    const int64_t rn = std::min(g.block_rows, c.rows - r0), cn = std::min(g.block_cols, c.cols - c0);
    // Each block is one single-threaded oneDNN call with its whole K loop: its result depends on the
    // block's shape only, never on the thread count.
    gemm_block(a.row_block(r0, rn), b.col_block(c0, cn), c.row_block(r0, rn).col_block(c0, cn), accumulate);
  };
  if (count == 1 || threads <= 1 || in_parallel_region()) {
    for (int64_t i = 0; i < count; ++i) block(i);
  } else {
    // Blocks are handed out first come, first served: a thread the OS preempts does not hold the
    // others up (which thread computes a block never changes its bits).
    const int team = static_cast<int>(std::min<int64_t>(threads, count));
    std::atomic<int64_t> next{0};
    parallel_for(team, team, [&](int64_t) {
      for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) block(i);
    });
  }
  trim_scratch(threads);
}

namespace {

const char* onednn_isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2_vnni_2: return "avx2_vnni_2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
    default: return "default";
  }
}

}  // namespace

const char* onednn_isa() { return onednn_isa_name(dnnl::get_effective_cpu_isa()); }

void trace_gemm(Trace& trace, DType dtype) {
  if (!trace.on()) return;
  trace.field("onednn_isa", onednn_isa());
  if (dtype == DType::kFloat16) trace.field("f16_gemm", native_matmul(dtype) ? "native" : "widened_to_f32");
  if (dtype == DType::kBFloat16) trace.field("bf16_gemm", native_matmul(dtype) ? "native" : "widened_to_f32");
}

std::string gemm_implementation(const GemmMatrix& a, const GemmMatrix& b, const GemmMatrix& c, bool accumulate,
                                int threads) {
  check_shapes(a, b, c);
  if (c.rows == 0 || c.cols == 0 || a.cols == 0) return "none (empty)";
  if (!native_matmul(a.dtype)) {
    const GemmMatrix a32(nullptr, DType::kFloat32, a.rows, a.cols, a.cols, 1);
    const GemmMatrix b32(nullptr, DType::kFloat32, b.rows, b.cols, b.cols, 1);
    const GemmMatrix c32(nullptr, DType::kFloat32, c.rows, c.cols, c.cols, 1);
    return std::string(dtype_name(a.dtype)) + " widened to fp32: " +
           gemm_implementation(a32, b32, c32, accumulate, threads);
  }
  ThreadScope scope(threads);
  const auto e = get_entry(make_key(a, b, c, accumulate, threads), a, c);
  return std::string(e->pd.impl_info_str()) + " (scratchpad " + std::to_string(e->scratch_bytes) + " B)";
}

}  // namespace tilegrad::core
