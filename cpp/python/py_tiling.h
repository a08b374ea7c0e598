// Tiling test hooks: any tiling as a Python dict of the fields its describe() lists (core/describe.h),
// the same list the TILEGRAD_VERBOSE trace prints.
#pragma once

#include <pybind11/pybind11.h>

#include "core/describe.h"

namespace tilegrad::py_support {

class DictVisitor final : public core::FieldVisitor {
 public:
  pybind11::dict dict;

 protected:
  void on_int(const char* name, int64_t v) override { dict[name] = v; }
  void on_bool(const char* name, bool v) override { dict[name] = v; }
  void on_real(const char* name, double v) override { dict[name] = v; }
  void on_word(const char* name, const char* v) override { dict[name] = v; }
};

template <class Tiling>
pybind11::dict tiling_dict(const Tiling& tiling) {
  DictVisitor v;
  tiling.describe(v);
  return v.dict;
}

}  // namespace tilegrad::py_support
