// aclCreate*/aclDestroy*/aclGet*Size of the aclnn argument objects, and aclGet/SetRawTensorAddr.
// Creation copies the caller's values; bad arguments return NULL with aclGetRecentErrMsg set.
#include "core/acl_objects.h"

#include <cstring>
#include <new>
#include <string>

#include "core/acl_tensor.h"
#include "core/error.h"
#include "tilegrad/tensor_view.hpp"

using namespace tilegrad::core;

namespace {

// Arrays longer than this are a caller's mistake (a garbage size), not a real argument.
constexpr uint64_t kMaxElements = uint64_t(1) << 32;

template <class T>
T* null_with_error(const std::string& message) {
  set_last_error(message);
  return nullptr;
}

// values[0, size) copied into a new Obj's `values`; NULL values with size > 0 is an error.
template <class Obj, class T>
Obj* create_array(const char* fn, const T* values, uint64_t size) {
  if (size && !values) return null_with_error<Obj>(concat(fn, ": value is null but size is ", size));
  if (size > kMaxElements) return null_with_error<Obj>(concat(fn, ": size ", size, " is not plausible"));
  auto* obj = new (std::nothrow) Obj;
  if (!obj) return null_with_error<Obj>(concat(fn, ": out of memory"));
  obj->values.assign(values, values + size);
  return obj;
}

template <class Obj>
aclnnStatus get_size(const char* fn, const Obj* obj, uint64_t size_of_obj, uint64_t* size) {
  return guard(fn, [&] {
    require_not_null(fn, "array", obj);
    require_not_null(fn, "size", size);
    *size = size_of_obj;
  });
}

}  // namespace

extern "C" {

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  const int32_t code = static_cast<int32_t>(dataType);
  const int64_t bytes = tilegrad::dtype_size(static_cast<tilegrad::DType>(code));
  if (!value) return null_with_error<aclScalar>("aclCreateScalar: value is null");
  if (bytes == 0) return null_with_error<aclScalar>(concat("aclCreateScalar: dataType ", code, " is not a data type tilegrad knows"));
  auto* s = new (std::nothrow) aclScalar;
  if (!s) return null_with_error<aclScalar>("aclCreateScalar: out of memory");
  s->dtype = code;
  std::memcpy(s->bytes, value, static_cast<size_t>(bytes));
  return s;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return create_array<aclIntArray>("aclCreateIntArray", value, size);
}
aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  return create_array<aclFloatArray>("aclCreateFloatArray", value, size);
}
aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return create_array<aclBoolArray>("aclCreateBoolArray", value, size);
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  if (size && !value) return null_with_error<aclTensorList>(concat("aclCreateTensorList: value is null but size is ", size));
  if (size > kMaxElements) return null_with_error<aclTensorList>(concat("aclCreateTensorList: size ", size, " is not plausible"));
  auto* list = new (std::nothrow) aclTensorList;
  if (!list) return null_with_error<aclTensorList>("aclCreateTensorList: out of memory");
  list->tensors.assign(value, value + size);
  return list;
}

aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  if (size && !value) return null_with_error<aclScalarList>(concat("aclCreateScalarList: value is null but size is ", size));
  if (size > kMaxElements) return null_with_error<aclScalarList>(concat("aclCreateScalarList: size ", size, " is not plausible"));
  auto* list = new (std::nothrow) aclScalarList;
  if (!list) return null_with_error<aclScalarList>("aclCreateScalarList: out of memory");
  list->scalars.assign(value, value + size);
  return list;
}

// Destroying NULL is a no-op that succeeds (as aclDestroyTensor).
aclnnStatus aclDestroyScalar(const aclScalar* scalar) { delete scalar; return ACLNN_SUCCESS; }
aclnnStatus aclDestroyIntArray(const aclIntArray* array) { delete array; return ACLNN_SUCCESS; }
aclnnStatus aclDestroyFloatArray(const aclFloatArray* array) { delete array; return ACLNN_SUCCESS; }
aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) { delete array; return ACLNN_SUCCESS; }
aclnnStatus aclDestroyTensorList(const aclTensorList* list) {
  if (list)
    for (const aclTensor* t : list->tensors) delete t;
  delete list;
  return ACLNN_SUCCESS;
}
aclnnStatus aclDestroyScalarList(const aclScalarList* list) {
  if (list)
    for (const aclScalar* s : list->scalars) delete s;
  delete list;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray* a, uint64_t* size) {
  return get_size("aclGetIntArraySize", a, a ? a->values.size() : 0, size);
}
aclnnStatus aclGetFloatArraySize(const aclFloatArray* a, uint64_t* size) {
  return get_size("aclGetFloatArraySize", a, a ? a->values.size() : 0, size);
}
aclnnStatus aclGetBoolArraySize(const aclBoolArray* a, uint64_t* size) {
  return get_size("aclGetBoolArraySize", a, a ? a->values.size() : 0, size);
}
aclnnStatus aclGetTensorListSize(const aclTensorList* l, uint64_t* size) {
  return get_size("aclGetTensorListSize", l, l ? l->tensors.size() : 0, size);
}
aclnnStatus aclGetScalarListSize(const aclScalarList* l, uint64_t* size) {
  return get_size("aclGetScalarListSize", l, l ? l->scalars.size() : 0, size);
}

aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr) {
  return guard("aclGetRawTensorAddr", [&] {
    require_not_null("aclGetRawTensorAddr", "tensor", tensor);
    require_not_null("aclGetRawTensorAddr", "addr", addr);
    *addr = tensor->data;
  });
}

aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr) {
  return guard("aclSetRawTensorAddr", [&] {
    require_not_null("aclSetRawTensorAddr", "tensor", tensor);
    tensor->data = addr;
  });
}

}  // extern "C"
