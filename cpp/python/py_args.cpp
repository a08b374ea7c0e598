#include "py_args.h"

#include <string>

#include "core/reduction.h"
#include "tilegrad/status.hpp"

namespace tilegrad::py_support {

namespace py = pybind11;

namespace {

[[noreturn]] void invalid(const char* op, const core::ReductionArg& r) {
  throw Error(Status::kParamInvalid, std::string(op) + ": reduction " + r.invalid);
}

core::ReductionArg from_name(const char* op, const std::string& name) {
  if (name.find('\0') != std::string::npos) {
    std::string shown;
    for (char c : name) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
    throw Error(Status::kParamInvalid, std::string(op) + ": reduction must not contain NUL characters, got '" +
                                           shown + "'");
  }
  return core::reduction_from_name(name.c_str());
}

// An integer beyond int64 cannot be a code: the same message as any other wrong code.
core::ReductionArg from_integer(const char* op, const py::handle& value) {
  const py::int_ index = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow)
    throw Error(Status::kParamInvalid, std::string(op) + ": reduction must be 0 (none), 1 (mean) or 2 (sum), got " +
                                           py::str(index).cast<std::string>());
  return core::reduction_from_code(static_cast<int64_t>(v));
}

}  // namespace

Reduction reduction_of(const char* op, const py::handle& value, bool accept_codes) {
  core::ReductionArg r;
  if (py::isinstance<py::str>(value)) {
    r = from_name(op, value.cast<std::string>());
  } else if (accept_codes && !PyBool_Check(value.ptr()) && !py::isinstance<py::bool_>(value) &&
             PyIndex_Check(value.ptr())) {
    r = from_integer(op, value);
  } else {
    throw Error(Status::kParamInvalid,
                std::string(op) + ": reduction must be a str" + (accept_codes ? " or an int" : "") + ", got " +
                    py::str(py::type::of(value).attr("__name__")).cast<std::string>() + " (" +
                    py::repr(value).cast<std::string>() + ")",
                ErrorKind::kType);
  }
  if (!r.valid()) invalid(op, r);
  return r.value;
}

}  // namespace tilegrad::py_support
