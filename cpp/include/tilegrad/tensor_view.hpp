// TensorView: a non-owning view of strided data (the native C++ API's tensor type).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tilegrad/export.h"

namespace tilegrad {

// Element types, numbered as aclDataType so the C ABI needs no translation table.
enum class DType : int32_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kInt8 = 2,
  kInt32 = 3,
  kUInt8 = 4,
  kInt16 = 6,
  kUInt16 = 7,
  kUInt32 = 8,
  kInt64 = 9,
  kUInt64 = 10,
  kFloat64 = 11,
  kBool = 12,
  kComplex64 = 16,   // accepted in tensors (named in messages); no operator computes on them
  kComplex128 = 17,
  kBFloat16 = 27,
  kUndefined = -1,
};

TILEGRAD_API int64_t dtype_size(DType dtype);      // bytes per element; 0 for unknown
TILEGRAD_API const char* dtype_name(DType dtype);  // "float32", "bfloat16", ...

constexpr int kMaxDims = 8;

// data points at element [0, ..., 0]; strides are in elements and may be 0 or negative.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  TensorView() = default;
  // Contiguous row-major view.
  TensorView(void* data_, DType dtype_, std::vector<int64_t> shape_)
      : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(contiguous_strides(shape)) {}
  TensorView(void* data_, DType dtype_, std::vector<int64_t> shape_, std::vector<int64_t> strides_)
      : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(std::move(strides_)) {}

  int rank() const { return static_cast<int>(shape.size()); }
  TILEGRAD_API int64_t numel() const;
  TILEGRAD_API bool is_contiguous() const;
  TILEGRAD_API static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
};

// dtype and shape of an output an operator would produce (for allocating it).
struct OutputSpec {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
};

// "[2,5]" - the shape format used in every error message.
TILEGRAD_API std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace tilegrad
