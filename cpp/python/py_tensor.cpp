#include "py_tensor.h"

#include <string>

#include "tilegrad/status.hpp"

namespace tilegrad::py_support {

DType dtype_of(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f') {
    if (size == 4) return DType::kFloat32;
    if (size == 2) return DType::kFloat16;
    if (size == 8) return DType::kFloat64;
  }
  if (kind == 'i') {
    if (size == 1) return DType::kInt8;
    if (size == 2) return DType::kInt16;
    if (size == 4) return DType::kInt32;
    if (size == 8) return DType::kInt64;
  }
  if (kind == 'u') {
    if (size == 1) return DType::kUInt8;
    if (size == 2) return DType::kUInt16;
    if (size == 4) return DType::kUInt32;
    if (size == 8) return DType::kUInt64;
  }
  if (kind == 'b' && size == 1) return DType::kBool;
  if (size == 2 && py::str(dt.attr("name")).cast<std::string>() == "bfloat16") return DType::kBFloat16;
  return DType::kUndefined;
}

static std::string type_name(const py::handle& obj) { return py::str(py::type::of(obj).attr("__name__")); }

TensorView view_of(const py::handle& obj, const char* arg, bool output) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(arg) + " must be a numpy.ndarray, got " + type_name(obj));
  auto a = py::reinterpret_borrow<py::array>(obj);
  TensorView v;
  v.dtype = dtype_of(a.dtype());
  if (v.dtype == DType::kUndefined)
    throw Error(Status::kParamInvalid, std::string(arg) + " dtype " + py::str(a.dtype()).cast<std::string>() +
                                           " is not supported");
  // Byte-swapped data (e.g. dtype '>f4' on x86) would be read as garbage: refuse it.
  if (!a.dtype().attr("isnative").cast<bool>())
    throw Error(Status::kParamInvalid, std::string(arg) + " dtype " + py::str(a.dtype()).cast<std::string>() +
                                           " is not in native byte order");
  if (output && !a.writeable()) throw Error(Status::kParamInvalid, std::string(arg) + " is not writeable");
  const auto itemsize = a.itemsize();
  v.shape.assign(a.shape(), a.shape() + a.ndim());
  v.strides.resize(a.ndim());
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (a.strides(i) % itemsize != 0)
      throw Error(Status::kParamInvalid, std::string(arg) + " stride " + std::to_string(a.strides(i)) +
                                             " bytes is not a multiple of its itemsize " + std::to_string(itemsize));
    v.strides[i] = a.strides(i) / itemsize;
  }
  v.data = const_cast<void*>(a.data());
  return v;
}

TensorView optional_view_of(const py::handle& obj, const char* arg) {
  return obj.is_none() ? TensorView{} : view_of(obj, arg);
}

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: return py::dtype("float32");
    case DType::kFloat16: return py::dtype("float16");
    case DType::kFloat64: return py::dtype("float64");
    case DType::kInt8: return py::dtype("int8");
    case DType::kInt16: return py::dtype("int16");
    case DType::kInt32: return py::dtype("int32");
    case DType::kInt64: return py::dtype("int64");
    case DType::kUInt8: return py::dtype("uint8");
    case DType::kUInt16: return py::dtype("uint16");
    case DType::kUInt32: return py::dtype("uint32");
    case DType::kUInt64: return py::dtype("uint64");
    case DType::kBool: return py::dtype("bool");
    case DType::kBFloat16: {
      py::object bf16 = py::module_::import("ml_dtypes").attr("bfloat16");
      return py::dtype::from_args(bf16);
    }
    default: throw Error(Status::kParamInvalid, "no NumPy dtype for this element type");
  }
}

Isa isa_from_name(const std::string& name) {
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  throw py::value_error("isa must be one of {scalar, avx2, avx512}, got '" + name + "'");
}

core::Platform platform_from(int threads, int64_t l1, int64_t l2, int64_t l3, const std::string& isa) {
  core::Platform p;
  p.threads = threads;
  p.l1_bytes = l1;
  p.l2_bytes = l2;
  p.l3_bytes = l3;
  p.isa = isa_from_name(isa);
  return p;
}

py::array allocate(const OutputSpec& spec) {
  std::vector<py::ssize_t> shape(spec.shape.begin(), spec.shape.end());
  return py::array(numpy_dtype(spec.dtype), shape);
}

py::array allocate(const OutputSpec& spec, const char* op, const char* arg) {
  // Bytes as a double: exact enough for the message, and no overflow for any shape.
  double bytes = static_cast<double>(dtype_size(spec.dtype));
  for (int64_t d : spec.shape) bytes *= static_cast<double>(d);
  const auto out_of_memory = [&] {
    return Error(Status::kInner,
                 std::string(op) + ": out of memory: " + arg + " of shape " + shape_str(spec.shape) + " (" +
                     py::str(py::float_(bytes)).cast<std::string>() + " bytes) could not be allocated",
                 ErrorKind::kMemory);
  };
  if (bytes > 9.2e18) throw out_of_memory();  // beyond int64 / NumPy's limit ("array is too big")
  try {
    return allocate(spec);
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_MemoryError) || e.matches(PyExc_ValueError)) throw out_of_memory();
    throw;
  } catch (const std::bad_alloc&) {
    throw out_of_memory();
  }
}

}  // namespace tilegrad::py_support
