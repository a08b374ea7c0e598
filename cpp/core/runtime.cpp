// CPU feature detection, the TILEGRAD_MAX_ISA cap, thread count, platform and build description.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/platform.h"
#include "tilegrad/runtime.hpp"

namespace tilegrad {

namespace {

Isa detect_isa() {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 register state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  if (avx512 && avx2) return Isa::kAvx512;
  if (avx2) return Isa::kAvx2;
  return Isa::kScalar;
}

bool parse_isa(const std::string& name, Isa* out) {
  if (name == "scalar") *out = Isa::kScalar;
  else if (name == "avx2") *out = Isa::kAvx2;
  else if (name == "avx512") *out = Isa::kAvx512;
  else return false;
  return true;
}

std::atomic<int> g_isa_cap{-1};     // -1: not yet read from the environment
std::atomic<int> g_num_threads{0};  // 0: OpenMP's default

Isa isa_cap() {
  int cap = g_isa_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    Isa parsed = Isa::kAvx512;
    const char* env = std::getenv("TILEGRAD_MAX_ISA");
    if (env && *env && !parse_isa(env, &parsed)) parsed = Isa::kAvx512;  // unknown value: no cap
    int expected = -1;
    g_isa_cap.compare_exchange_strong(expected, static_cast<int>(parsed));
    cap = g_isa_cap.load();
  }
  return static_cast<Isa>(cap);
}

int64_t cache_size(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? v : fallback;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

Isa detected_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

Isa active_isa() { return std::min(detected_isa(), isa_cap()); }

void set_max_isa(const std::string& name) {
  Isa isa;
  if (!parse_isa(name, &isa))
    core::fail(Status::kParamInvalid, "set_max_isa: isa must be one of {scalar, avx2, avx512}, got '", name, "'");
  g_isa_cap.store(static_cast<int>(isa));
}

std::string max_isa() { return isa_name(isa_cap()); }

void set_num_threads(int n) {
  core::check(n >= 1, "set_num_threads: n must be >= 1, got ", n);
  g_num_threads.store(n);
}

int get_num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : std::max(1, omp_get_max_threads());
}

#ifndef TILEGRAD_VERSION
#error "TILEGRAD_VERSION is defined by CMakeLists.txt from pyproject.toml"
#endif

std::string build_info() {
  std::string s = "tilegrad " TILEGRAD_VERSION "; compiler ";
#if defined(__clang__)
  s += "clang " __clang_version__;
#elif defined(__GNUC__)
  s += "gcc " __VERSION__;
#endif
  s += "; OpenMP " + std::to_string(_OPENMP);
  s += "; kernels scalar, avx2 (-mavx2 -mfma -mf16c), avx512 (-mavx512f/bw/vl/dq); no -ffast-math";
#if defined(__SANITIZE_ADDRESS__)
  s += "; AddressSanitizer";
#endif
  return s;
}

namespace core {

Platform Platform::current() {
  Platform p;
  p.threads = get_num_threads();
  p.l1_bytes = cache_size(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
  p.l2_bytes = cache_size(_SC_LEVEL2_CACHE_SIZE, 1 << 20);
  // Hypervisors sometimes report the host's whole L3; what one VM can use is rarely above 64 MiB.
  p.l3_bytes = std::min<int64_t>(cache_size(_SC_LEVEL3_CACHE_SIZE, 32 << 20), 64 << 20);
  p.isa = active_isa();
  return p;
}

}  // namespace core
}  // namespace tilegrad
