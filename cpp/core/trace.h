// TILEGRAD_VERBOSE=1: one line per operator launch on stderr, like ONEDNN_VERBOSE (shown wrapped):
//
//   tilegrad_verbose,aclnnSiluBackward,gradOutput=bf16[4096,4096],self=bf16[4096,4096],
//     gradInput=bf16[4096,4096],isa=avx512,threads=2,bf16_convert=vcvtneps2bf16,numel=16777216,
//     num_tiles=2,tile_elems=8388608,streaming_stores=true,time_ms=52.727
//
// The operator, its tensors (dtype, shape, strides when not contiguous), the kernel ISA, the thread
// count, the bf16 rounding path when a tensor is bf16, every field its tiling describes
// (core/describe.h), launch-level choices, and the wall time of the launch. An operator's Launch
// records its line once, when it is built (phase 1: GetWorkspaceSize, or the native call);
// run_now / launch_executor time run() and print it; a run that throws prints nothing. Off (the
// default) that is one branch when recording and one at launch; nothing is kept or printed. The
// variable is read once, at the first launch; concurrent launches never interleave their lines
// (one write per line).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/describe.h"
#include "tilegrad/export.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {

namespace detail {
extern TILEGRAD_API std::atomic<int> g_verbose;  // -1 until TILEGRAD_VERBOSE is read, then 0 (off) or 1 (on)
TILEGRAD_API int read_verbose_env();
}  // namespace detail

// True when TILEGRAD_VERBOSE is a positive integer (read once; an unknown value is reported once
// on stderr and means off).
inline bool verbose() {
  const int v = detail::g_verbose.load(std::memory_order_relaxed);
  return (v < 0 ? detail::read_verbose_env() : v) > 0;
}

// One tensor parameter of a launch; view null or absent (no dtype, no data) is left out.
struct TraceTensor {
  const char* name;
  const TensorView* view;
};

class Trace {
 public:
  // Records the operator, its tensors and the fields tiling.describe() lists (nothing when off).
  template <class Tiling>
  void record(const char* op, std::initializer_list<TraceTensor> tensors, const Tiling& tiling) {
    if (!verbose()) return;
    record_described(op, tensors, &tiling,
                     [](const void* t, FieldVisitor& v) { static_cast<const Tiling*>(t)->describe(v); });
  }
  // An operator without a tiling struct.
  void record(const char* op, std::initializer_list<TraceTensor> tensors) {
    if (verbose()) record_described(op, tensors, nullptr, nullptr);
  }
  // A launch-level choice outside the tiling (after record(); nothing when off).
  template <class T>
  void field(const char* name, T value) {
    if (!text_.empty()) append_field(name, value);
  }

  bool on() const { return !text_.empty(); }
  // Runs run() and, when recorded, prints the line with the wall time run() took (one write).
  template <class Run>
  void timed(Run&& run) const {
    if (!on()) return run();
    const int64_t start = now_ns();
    run();
    print(now_ns() - start);
  }

 private:
  using Describe = void (*)(const void*, FieldVisitor&);
  static int64_t now_ns();
  void print(int64_t elapsed_ns) const;
  void record_described(const char* op, std::initializer_list<TraceTensor> tensors, const void* tiling,
                        Describe describe);
  void append_field(const char* name, int64_t value);
  void append_field(const char* name, int value) { append_field(name, static_cast<int64_t>(value)); }
  void append_field(const char* name, bool value);
  void append_field(const char* name, double value);
  void append_field(const char* name, float value) { append_field(name, static_cast<double>(value)); }
  void append_field(const char* name, const char* value);

  std::string text_;  // "tilegrad_verbose,<op>,...": everything but the time
};

}  // namespace tilegrad::core
