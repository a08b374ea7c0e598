// NumPy arrays <-> TensorView for the bindings. Arrays are read through pybind11's py::array (the
// array struct itself), never the buffer protocol, so ml_dtypes.bfloat16 arrays work zero-copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "core/platform.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::py_support {

namespace py = pybind11;

// Element type of a NumPy dtype (bfloat16 recognised by name); kUndefined if tilegrad has none.
DType dtype_of(const py::dtype& dt);

// The view of `obj` (TypeError naming `arg` unless it is a numpy.ndarray). Outputs must be writeable.
TensorView view_of(const py::handle& obj, const char* arg, bool output = false);

// The NumPy dtype object for d (ml_dtypes.bfloat16 for bf16).
py::dtype numpy_dtype(DType d);

// A new C-contiguous array for spec.
py::array allocate(const OutputSpec& spec);
// Same, but a failed allocation is a MemoryError naming the operator, the output, its shape and
// its size in bytes (not NumPy's message alone, nor a ValueError for a size beyond int64).
py::array allocate(const OutputSpec& spec, const char* op, const char* arg);

// The output argument `out` when given, else a new array of spec() (MemoryError as above). spec is
// called only for None: an output-spec query validates the inputs, a given out is validated by the
// operator itself.
template <class SpecFn>
py::object given_or_allocated(const py::object& out, SpecFn&& spec, const char* op, const char* arg) {
  return out.is_none() ? py::object(allocate(spec(), op, arg)) : out;
}

// An optional input: empty TensorView for None.
TensorView optional_view_of(const py::handle& obj, const char* arg);

// "scalar" | "avx2" | "avx512" (ValueError otherwise).
Isa isa_from_name(const std::string& name);

// A Platform from explicit values: tiling tests simulate machines that are not this one.
core::Platform platform_from(int threads, int64_t l1, int64_t l2, int64_t l3, const std::string& isa);

}  // namespace tilegrad::py_support

// The binding translation units (bind_<op>.cpp, module.cpp) include this header and nothing else;
// they are written with pybind11 as py and in tilegrad's names.
namespace py = pybind11;
using namespace tilegrad;  // NOLINT(google-build-using-namespace): binding sources only
