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

}  // namespace tilegrad::ops
