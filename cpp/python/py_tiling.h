// Tiling test hooks: the fields of core::ElementwiseTiling as a Python dict (operators add their own).
#pragma once

#include <pybind11/pybind11.h>

#include "core/elementwise.h"

namespace tilegrad::py_support {

inline pybind11::dict elementwise_tiling_dict(const core::ElementwiseTiling& t) {
  pybind11::dict d;
  d["numel"] = t.numel;
  d["num_tiles"] = t.num_tiles;
  d["tile_elems"] = t.tile_elems;
  d["streaming_stores"] = t.streaming_stores;
  return d;
}

}  // namespace tilegrad::py_support
