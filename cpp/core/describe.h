// How a tiling describes itself: its describe(FieldVisitor&) member names each field and the plan it
// chose, one (name, value) pair at a time, values an integer, a flag, a real number or a word. One
// list per tiling feeds every reader: the Python test hooks (a dict, cpp/python/py_tiling.h) and the
// TILEGRAD_VERBOSE trace line (core/trace.h). A field added to a tiling is added to its describe()
// and shows up in both.
#pragma once

#include <cstdint>

#include "tilegrad/export.h"
#include "tilegrad/runtime.hpp"

namespace tilegrad::core {

class TILEGRAD_API FieldVisitor {
 public:
  void field(const char* name, int64_t value) { on_int(name, value); }
  void field(const char* name, int value) { on_int(name, value); }
  // Sizes and offsets (all below 2^63: every workspace size is overflow-checked as int64).
  void field(const char* name, uint64_t value) { on_int(name, static_cast<int64_t>(value)); }
  void field(const char* name, bool value) { on_bool(name, value); }
  void field(const char* name, double value) { on_real(name, value); }
  void field(const char* name, float value) { on_real(name, value); }
  void field(const char* name, const char* value) { on_word(name, value); }
  void field(const char* name, Isa value) { on_word(name, isa_name(value)); }

 protected:
  ~FieldVisitor() = default;
  virtual void on_int(const char* name, int64_t value) = 0;
  virtual void on_bool(const char* name, bool value) = 0;
  virtual void on_real(const char* name, double value) = 0;
  virtual void on_word(const char* name, const char* value) = 0;
};

}  // namespace tilegrad::core
