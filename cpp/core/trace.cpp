// The TILEGRAD_VERBOSE trace line (see trace.h).
#include "core/trace.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tilegrad/runtime.hpp"

namespace tilegrad::core {

namespace detail {

std::atomic<int> g_verbose{-1};

int read_verbose_env() {
  const char* env = std::getenv("TILEGRAD_VERBOSE");
  int level = 0;
  bool known = true;
  if (env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    known = *end == '\0';
    level = known && v > 0 ? 1 : 0;
  }
  int expected = -1;
  if (g_verbose.compare_exchange_strong(expected, level) && !known)  // the first reader reports
    std::fprintf(stderr, "tilegrad: warning: TILEGRAD_VERBOSE='%s' is not an integer; trace off\n", env);
  return g_verbose.load();
}

}  // namespace detail

namespace {

// Short dtype names, as oneDNN's verbose lines use them.
const char* short_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat64: return "f64";
    case DType::kInt8: return "i8";
    case DType::kInt16: return "i16";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kUInt8: return "u8";
    case DType::kUInt16: return "u16";
    case DType::kUInt32: return "u32";
    case DType::kUInt64: return "u64";
    case DType::kBool: return "bool";
    case DType::kComplex64: return "c64";
    case DType::kComplex128: return "c128";
    default: return "undefined";
  }
}

void append_list(std::string& s, const std::vector<int64_t>& values) {
  s += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(values[i]);
  }
  s += ']';
}

// "name=f32[8,5]", with "strides[1,8]" appended when the view is not contiguous.
void append_tensor(std::string& s, const char* name, const TensorView& t) {
  s += ',';
  s += name;
  s += '=';
  s += short_dtype(t.dtype);
  append_list(s, t.shape);
  if (!t.is_contiguous()) {
    s += "strides";
    append_list(s, t.strides);
  }
}

// ",name=value": one field of the line.
std::string field_text(const char* name, const std::string& value) { return std::string(",") + name + "=" + value; }

std::string real_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Collects a tiling's fields as ",name=value"; the ISA is kept apart (the line prints it before
// the thread count, whether or not the tiling has one).
class LineVisitor final : public FieldVisitor {
 public:
  std::string fields;
  std::string isa;

 protected:
  void on_int(const char* name, int64_t v) override { add(name, std::to_string(v)); }
  void on_bool(const char* name, bool v) override { add(name, v ? "true" : "false"); }
  void on_real(const char* name, double v) override { add(name, real_text(v)); }
  void on_word(const char* name, const char* v) override {
    if (std::string(name) == "isa") isa = v;
    else add(name, v);
  }

 private:
  void add(const char* name, const std::string& value) { fields += field_text(name, value); }
};

// How the kernels round fp32 to bf16 (core/simd_avx512.h): AVX-512 kernels use vcvtneps2bf16 where
// the CPU has AVX512-BF16 (vectors holding a subnormal take the integer path); otherwise integer
// round-to-nearest-even. Same bits either way.
const char* bf16_convert_path(Isa isa) {
  static const bool has_bf16 = (__builtin_cpu_init(), __builtin_cpu_supports("avx512bf16"));
  return isa == Isa::kAvx512 && has_bf16 ? "vcvtneps2bf16" : "integer";
}

Isa isa_from(const std::string& name) {
  if (name == "avx512") return Isa::kAvx512;
  return name == "avx2" ? Isa::kAvx2 : Isa::kScalar;
}

}  // namespace

void Trace::record_described(const char* op, std::initializer_list<TraceTensor> tensors, const void* tiling,
                             Describe describe) {
  LineVisitor v;
  if (describe) describe(tiling, v);
  std::string s = "tilegrad_verbose,";
  s += op;
  for (const TraceTensor& t : tensors)
    if (t.view && (t.view->dtype != DType::kUndefined || t.view->data)) append_tensor(s, t.name, *t.view);
  s += ",isa=";
  s += v.isa.empty() ? isa_name(active_isa()) : v.isa;
  s += ",threads=" + std::to_string(get_num_threads());
  bool bf16 = false;
  for (const TraceTensor& t : tensors) bf16 |= t.view && t.view->dtype == DType::kBFloat16;
  if (bf16) s += field_text("bf16_convert", bf16_convert_path(v.isa.empty() ? active_isa() : isa_from(v.isa)));
  s += v.fields;
  text_ = std::move(s);
}

void Trace::append_field(const char* name, int64_t value) { text_ += field_text(name, std::to_string(value)); }
void Trace::append_field(const char* name, bool value) { text_ += field_text(name, value ? "true" : "false"); }
void Trace::append_field(const char* name, double value) { text_ += field_text(name, real_text(value)); }
void Trace::append_field(const char* name, const char* value) { text_ += field_text(name, value); }

int64_t Trace::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Trace::print(int64_t elapsed_ns) const {
  char time[48];
  std::snprintf(time, sizeof time, ",time_ms=%.3f\n", static_cast<double>(elapsed_ns) * 1e-6);
  const std::string line = text_ + time;
  // One call on the (unbuffered, locked) stderr stream: concurrent launches print whole lines.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tilegrad::core
