// Non-array arguments of the bindings that every operator family reads the same way.
#pragma once

#include <pybind11/pybind11.h>

#include "tilegrad/reduction.hpp"

namespace tilegrad::py_support {

// The reduction argument: "none" | "mean" | "sum"; with accept_codes also the aclnn int64 codes
// 0, 1, 2 (a Python or NumPy integer, never a bool). A value of another type is a TypeError naming
// its type and value; a str with a NUL character or an unknown name or code a ValueError (161002)
// whose message is the C ABI's ("<op>: reduction must be one of none, mean, sum, got 'avg'").
Reduction reduction_of(const char* op, const pybind11::handle& value, bool accept_codes = false);

}  // namespace tilegrad::py_support
