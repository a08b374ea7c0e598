// How a tiling describes itself: its describe(FieldVisitor&) lists each field and the plan it chose
// as a table of (name, value) pairs, values an integer, a flag, a real number or a word:
//
//   v.fields({{"rows", rows}, {"cols", cols}, {"streaming_stores", streaming_stores}, {"isa", isa}});
//
// One list per tiling feeds every reader: the Python test hooks (a dict, cpp/python/py_tiling.h)
// and the TILEGRAD_VERBOSE trace line (core/trace.h). A field added to a tiling's describe() shows
// up in both.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tilegrad/export.h"
#include "tilegrad/runtime.hpp"

namespace tilegrad::core {

struct Field {
  enum class Kind { kInt, kBool, kReal, kWord };
  const char* name;
  Kind kind;
  int64_t integer = 0;  // kInt, kBool
  double real = 0;      // kReal
  const char* word = nullptr;

  Field(const char* n, int64_t v) : name(n), kind(Kind::kInt), integer(v) {}
  Field(const char* n, int v) : name(n), kind(Kind::kInt), integer(v) {}
  // Sizes and offsets (all below 2^63: every workspace size is overflow-checked as int64).
  Field(const char* n, uint64_t v) : name(n), kind(Kind::kInt), integer(static_cast<int64_t>(v)) {}
  Field(const char* n, bool v) : name(n), kind(Kind::kBool), integer(v) {}
  Field(const char* n, double v) : name(n), kind(Kind::kReal), real(v) {}
  Field(const char* n, float v) : name(n), kind(Kind::kReal), real(v) {}
  Field(const char* n, const char* v) : name(n), kind(Kind::kWord), word(v) {}
  Field(const char* n, Isa v) : name(n), kind(Kind::kWord), word(isa_name(v)) {}
};

class TILEGRAD_API FieldVisitor {
 public:
  void fields(std::initializer_list<Field> list) {
    for (const Field& f : list) {
      switch (f.kind) {
        case Field::Kind::kInt: on_int(f.name, f.integer); break;
        case Field::Kind::kBool: on_bool(f.name, f.integer != 0); break;
        case Field::Kind::kReal: on_real(f.name, f.real); break;
        case Field::Kind::kWord: on_word(f.name, f.word); break;
      }
    }
  }

 protected:
  ~FieldVisitor() = default;
  virtual void on_int(const char* name, int64_t value) = 0;
  virtual void on_bool(const char* name, bool value) = 0;
  virtual void on_real(const char* name, double value) = 0;
  virtual void on_word(const char* name, const char* value) = 0;
};

}  // namespace tilegrad::core
