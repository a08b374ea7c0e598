// CPU feature detection, the TILEGRAD_MAX_ISA cap, thread count, platform and build description.
#include <cpuid.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

std::mutex g_env_mutex;
std::string g_isa_env_warning;  // pending message about an unknown TILEGRAD_MAX_ISA
std::atomic<bool> g_isa_env_reported{false};

Isa isa_cap() {
  int cap = g_isa_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    Isa parsed = Isa::kAvx512;
    const char* env = std::getenv("TILEGRAD_MAX_ISA");
    if (env && *env && !parse_isa(env, &parsed)) {
      parsed = Isa::kAvx512;  // unknown value: no cap, but never silently
      std::lock_guard<std::mutex> lock(g_env_mutex);
      g_isa_env_warning = std::string("TILEGRAD_MAX_ISA='") + env +
                          "' is not one of {scalar, avx2, avx512}; ignored (kernels are not capped)";
    }
    int expected = -1;
    g_isa_cap.compare_exchange_strong(expected, static_cast<int>(parsed));
    cap = g_isa_cap.load();
  }
  return static_cast<Isa>(cap);
}

// Prints the TILEGRAD_MAX_ISA warning once unless a front end took it first.
void report_isa_env_warning() {
  std::lock_guard<std::mutex> lock(g_env_mutex);
  if (g_isa_env_warning.empty() || g_isa_env_reported) return;
  g_isa_env_reported = true;
  std::fprintf(stderr, "tilegrad: warning: %s\n", g_isa_env_warning.c_str());
}

int64_t cache_size(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? v : fallback;
}

// Data/unified caches from cpuid's deterministic cache parameters (leaf 4 on Intel, 0x8000001D on
// AMD): size of one instance per level (the bytes one core's share of a shared cache is not: an
// L3 shared by 8 cores is reported whole, as sysfs does). 0 where cpuid does not describe a level.
struct CpuidCaches {
  int64_t bytes[4] = {0, 0, 0, 0};  // index = level
};

CpuidCaches cpuid_caches() {
  CpuidCaches c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
  const bool amd = b == 0x68747541;  // "Auth"enticAMD
  unsigned leaf = 4;
  if (amd) {
    unsigned ea = 0, eb = 0, ec = 0, ed = 0;
    if (!__get_cpuid(0x80000000, &ea, &eb, &ec, &ed) || ea < 0x8000001D) return c;
    __get_cpuid(0x80000001, &ea, &eb, &ec, &ed);
    if (!(ec & (1u << 22))) return c;  // TopologyExtensions: leaf 0x8000001D valid
    leaf = 0x8000001D;
  } else if (a < 4) {
    return c;
  }
  for (unsigned i = 0; i < 16; ++i) {
    __cpuid_count(leaf, i, a, b, cx, d);
    const unsigned type = a & 0x1f;  // 0 none, 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    if (type == 2) continue;
    const unsigned level = (a >> 5) & 0x7;
    if (level < 1 || level > 3) continue;
    const int64_t ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1, line = (b & 0xfff) + 1;
    const int64_t sets = static_cast<int64_t>(cx) + 1;
    c.bytes[level] = ways * partitions * line * sets;
  }
  return c;
}

// Size of one cache at `level` as sysfs describes cpu0's (0 when absent or unreadable).
int64_t sysfs_cache_bytes(int level) {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l) || !(ty >> type) || !(sz >> size)) continue;
    if (l != level || type == "Instruction" || size.empty()) continue;
    int64_t n = std::atoll(size.c_str());
    const char unit = size.back();
    if (unit == 'K') n <<= 10;
    if (unit == 'M') n <<= 20;
    if (unit == 'G') n <<= 30;
    return n > 0 ? n : 0;
  }
  return 0;
}

// One cache level: cpuid first, sysfs where cpuid says nothing, and when both answer but disagree
// the smaller (a hypervisor may pass the host's cpuid through while the VM's sysfs is right, or
// sysconf may sum the L3 of several dies: tilings must never assume more cache than there is).
int64_t detect_cache(int level, int64_t from_cpuid, int sysconf_name, int64_t fallback) {
  const int64_t from_sysfs = sysfs_cache_bytes(level);
  if (from_cpuid > 0 && from_sysfs > 0) return std::min(from_cpuid, from_sysfs);
  if (from_cpuid > 0) return from_cpuid;
  if (from_sysfs > 0) return from_sysfs;
  return cache_size(sysconf_name, fallback);
}

struct Caches {
  int64_t l1, l2, l3;
};

const Caches& detected_caches() {
  static const Caches caches = [] {
    const CpuidCaches c = cpuid_caches();
    Caches r;
    r.l1 = detect_cache(1, c.bytes[1], _SC_LEVEL1_DCACHE_SIZE, 32 << 10);
    r.l2 = detect_cache(2, c.bytes[2], _SC_LEVEL2_CACHE_SIZE, 1 << 20);
    r.l3 = detect_cache(3, c.bytes[3], _SC_LEVEL3_CACHE_SIZE, 32 << 20);
    return r;
  }();
  return caches;
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

Isa active_isa() {
  const Isa cap = isa_cap();
  if (!g_isa_env_reported) report_isa_env_warning();
  return std::min(detected_isa(), cap);
}

std::string take_max_isa_env_warning() {
  isa_cap();
  std::lock_guard<std::mutex> lock(g_env_mutex);
  if (g_isa_env_reported) return "";
  g_isa_env_reported = true;
  return g_isa_env_warning;
}

void set_max_isa(const std::string& name) {
  Isa isa;
  if (!parse_isa(name, &isa))
    core::fail(Status::kParamInvalid, "set_max_isa: isa must be one of {scalar, avx2, avx512}, got '", name, "'");
  g_isa_cap.store(static_cast<int>(isa));
}

std::string max_isa() { return isa_name(isa_cap()); }

void set_num_threads(int n) {
  core::check(n >= 1, "set_num_threads: n must be >= 1, got ", n);
  core::check(n <= kMaxNumThreads, "set_num_threads: n must be <= ", kMaxNumThreads, ", got ", n);
  g_num_threads.store(n);
}

int get_num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  // OMP_NUM_THREADS=100000 must not reach a parallel region (libgomp aborts or crashes): capped.
  return n > 0 ? n : std::clamp(omp_get_max_threads(), 1, kMaxNumThreads);
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
  const Caches& c = detected_caches();
  p.l1_bytes = c.l1;
  p.l2_bytes = c.l2;
  p.l3_bytes = c.l3;
  p.isa = active_isa();
  return p;
}

}  // namespace core
}  // namespace tilegrad
