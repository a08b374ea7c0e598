// Argument checks shared by the fused linear cross-entropy family.
#pragma once

#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

struct FlceArg {
  const char* name;
  const TensorView* view;  // null: absent optional tensor
};

inline bool flce_present(const TensorView& t) { return t.dtype != DType::kUndefined; }

// Outputs have distinct elements and overlap neither each other nor any input (no in-place).
inline void flce_check_overlaps(const char* op, std::initializer_list<FlceArg> outputs,
                                std::initializer_list<FlceArg> inputs) {
  for (auto o = outputs.begin(); o != outputs.end(); ++o) {
    if (!o->view) continue;
    core::require_no_self_overlap(op, o->name, *o->view);
    for (auto p = outputs.begin(); p != o; ++p)
      if (p->view) core::require_no_partial_overlap(op, o->name, *o->view, p->name, *p->view, false);
    for (const FlceArg& in : inputs)
      if (in.view) core::require_no_partial_overlap(op, o->name, *o->view, in.name, *in.view, false);
  }
}

// t's dtype must be ref's ("<op>: weight dtype float16 != input dtype bfloat16").
inline void flce_require_same_dtype(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                                    const TensorView& ref) {
  core::check(t.dtype == ref.dtype, op, ": ", arg, " dtype ", dtype_name(t.dtype), " != ", ref_arg, " dtype ",
              dtype_name(ref.dtype));
}

}  // namespace tilegrad::ops
