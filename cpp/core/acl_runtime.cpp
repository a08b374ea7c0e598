// The CPU "device" behind acl/acl.h: device 0 is the host, streams are synchronous (a launch has
// finished when it returns), device memory is 64-byte aligned host memory whose allocations are
// tracked so aclrtMemcpy can refuse ranges that run past them.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include <unistd.h>

#include "acl/acl.h"
#include "core/acl_objects.h"
#include "core/acl_runtime.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/workspace.h"

namespace tilegrad::core {

namespace {

std::mutex g_mem_mutex;
struct Allocation {
  size_t size = 0;
  bool host = false;  // aclrtMallocHost (else aclrtMalloc): what aclrtPointerGetAttributes reports
};
std::map<uintptr_t, Allocation> g_allocations;  // start -> allocation
std::mutex g_stream_mutex;
std::set<uintptr_t> g_streams;
uintptr_t g_next_stream = 0x5000;

// The tracked allocation containing p, if any: {start, allocation}; {0, size 0} otherwise.
std::pair<uintptr_t, Allocation> allocation_containing(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(addr);
  if (it == g_allocations.begin()) return {0, Allocation{}};
  --it;
  if (addr < it->first + std::max<size_t>(it->second.size, 1)) return *it;
  return {0, Allocation{}};
}

// Host memory from aclrtMallocHost, device memory from aclrtMalloc: both aligned host memory here.
// ptr is not null (the callers check it, naming their own argument).
aclError allocate(const char* fn, void** ptr, size_t size, bool host) {
  if (size == 0) return rt_fail(concat(fn, ": size must be > 0"));
  if (size > (size_t(1) << 48)) return rt_fail(concat(fn, ": size ", size, " is too large"), ACL_ERROR_BAD_ALLOC);
  void* p = alloc_aligned(size);
  if (!p) return rt_fail(concat(fn, ": out of memory allocating ", size, " bytes"), ACL_ERROR_BAD_ALLOC);
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{size, host};
  *ptr = p;
  return ACL_SUCCESS;
}

// NULL strides at aclCreateTensor mean contiguous row-major over the view dims (the vendor's samples
// pass NULL for contiguous tensors). A dimension of 0 counts as 1, as PyTorch's contiguous strides,
// so no stride is 0. False if a stride overflows int64.
bool contiguous_strides(const std::vector<int64_t>& dims, std::vector<int64_t>* strides) {
  strides->assign(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    if (__builtin_mul_overflow((*strides)[i], std::max<int64_t>(dims[i], 1), &(*strides)[i - 1])) return false;
  return true;
}

bool is_private_format(int32_t f) {
  switch (f) {
    case ACL_FORMAT_NC1HWC0: case ACL_FORMAT_FRACTAL_Z: case ACL_FORMAT_NC1HWC0_C04:
    case ACL_FORMAT_FRACTAL_NZ: case ACL_FORMAT_NDC1HWC0: case ACL_FRACTAL_Z_3D:
      return true;
    default:
      return false;
  }
}

}  // namespace

aclError rt_fail(const std::string& message, aclError code) {
  set_last_error(message);
  return code;
}

aclError check_stream(const char* fn, aclrtStream stream) {
  if (!stream) return ACL_SUCCESS;  // the default stream
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  if (!g_streams.count(reinterpret_cast<uintptr_t>(stream)))
    return rt_fail(concat(fn, ": stream ", stream, " is not a live stream"), ACL_ERROR_RT_PARAM_INVALID);
  return ACL_SUCCESS;
}

void require_not_null(const char* op, const char* arg, const void* t) {
  if (!t) fail(Status::kParamNullptr, op, ": ", arg, " is null");
}

TensorView view_at(const char* op, const char* arg, const aclTensor* t, void* data) {
  check(!is_private_format(t->format), op, ": ", arg, " format ", static_cast<int>(t->format),
        " is a private packed format; only plain formats (ND, NCHW, NHWC, NCDHW, ...) are supported");
  const DType dtype = static_cast<DType>(t->dtype);
  const int64_t es = dtype_size(dtype);
  TensorView v;
  v.dtype = dtype;
  v.shape = t->view_dims;
  v.strides = t->strides;
  v.data = t->data;  // an empty view keeps the caller's pointer, whatever it is
  bool empty = false;
  for (int64_t d : v.shape) empty |= d == 0;
  if (es > 0 && !empty) {
    // Extent of the view and size of the storage, refusing anything that overflows int64 (huge
    // dims or strides must not wrap around into "inside the storage").
    bool overflow = false;
    int64_t lo = t->offset, hi = t->offset, numel = 1;
    for (size_t i = 0; i < v.shape.size(); ++i) {
      int64_t span = 0;
      overflow |= __builtin_mul_overflow(v.shape[i] - 1, v.strides[i], &span);
      int64_t& side = span < 0 ? lo : hi;
      overflow |= __builtin_add_overflow(side, span, &side);
      overflow |= __builtin_mul_overflow(numel, v.shape[i], &numel);
    }
    int64_t storage = 1, bytes = 0;
    for (int64_t d : t->storage_dims) overflow |= __builtin_mul_overflow(storage, d, &storage);
    overflow |= __builtin_mul_overflow(storage, es, &bytes);
    check(!overflow, op, ": ", arg, " view (shape ", shape_str(v.shape), ", strides ", shape_str(v.strides),
          ", offset ", t->offset, ") over storage shape ", shape_str(t->storage_dims), " overflows 64-bit indexing");
    check(lo >= 0 && hi < storage, op, ": ", arg, " view (shape ", shape_str(v.shape), ", strides ",
          shape_str(v.strides), ", offset ", t->offset, ") reaches elements [", lo, ", ", hi,
          "] outside its storage of ", storage, " elements (storage shape ", shape_str(t->storage_dims), ")");
    require_not_null(op, (std::string(arg) + " data").c_str(), data);
    v.data = static_cast<char*>(data) + t->offset * es;
  }
  return v;
}

}  // namespace tilegrad::core

using namespace tilegrad::core;

extern "C" {

aclError aclInit(const char*) { return ACL_SUCCESS; }
aclError aclFinalize(void) { return ACL_SUCCESS; }

aclError aclrtSetDevice(int32_t deviceId) {
  if (deviceId != 0)
    return rt_fail(concat("aclrtSetDevice: deviceId must be 0 (the CPU), got ", deviceId), ACL_ERROR_RT_INVALID_DEVICEID);
  return ACL_SUCCESS;
}
aclError aclrtResetDevice(int32_t deviceId) {
  if (deviceId != 0)
    return rt_fail(concat("aclrtResetDevice: deviceId must be 0 (the CPU), got ", deviceId), ACL_ERROR_RT_INVALID_DEVICEID);
  return ACL_SUCCESS;
}
aclError aclrtGetDevice(int32_t* deviceId) {
  if (!deviceId) return rt_fail("aclrtGetDevice: deviceId is null");
  *deviceId = 0;
  return ACL_SUCCESS;
}
aclError aclrtGetDeviceCount(uint32_t* count) {
  if (!count) return rt_fail("aclrtGetDeviceCount: count is null");
  *count = 1;
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  if (!stream) return rt_fail("aclrtCreateStream: stream is null");
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  const uintptr_t id = g_next_stream;
  g_next_stream += 16;
  g_streams.insert(id);
  *stream = reinterpret_cast<aclrtStream>(id);
  return ACL_SUCCESS;
}
aclError aclrtDestroyStream(aclrtStream stream) {
  std::lock_guard<std::mutex> lock(g_stream_mutex);
  if (g_streams.erase(reinterpret_cast<uintptr_t>(stream)) != 1)
    return rt_fail("aclrtDestroyStream: not a live stream", ACL_ERROR_RT_PARAM_INVALID);
  forget_stream_callbacks(stream);
  return ACL_SUCCESS;
}
// Launches run synchronously; only host callbacks queued for a subscribed thread can be outstanding.
aclError aclrtSynchronizeStream(aclrtStream stream) {
  if (aclError e = check_stream("aclrtSynchronizeStream", stream)) return e;
  return wait_stream_callbacks("aclrtSynchronizeStream", stream, false, -1);
}
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  if (aclError e = check_stream("aclrtSynchronizeStreamWithTimeout", stream)) return e;
  return wait_stream_callbacks("aclrtSynchronizeStreamWithTimeout", stream, false, timeout > 0 ? timeout : -1);
}
aclError aclrtSynchronizeDevice(void) { return wait_stream_callbacks("aclrtSynchronizeDevice", nullptr, true, -1); }

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy) {
  if (!devPtr) return rt_fail("aclrtMalloc: devPtr is null");
  return allocate("aclrtMalloc", devPtr, size, false);
}
aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (!hostPtr) return rt_fail("aclrtMallocHost: hostPtr is null");
  return allocate("aclrtMallocHost", hostPtr, size, true);
}

aclError aclrtPointerGetAttributes(const void* ptr, aclrtPtrAttributes* attributes) {
  if (!ptr || !attributes) return rt_fail("aclrtPointerGetAttributes: ptr and attributes must not be null");
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    a = allocation_containing(ptr).second;
  }
  *attributes = aclrtPtrAttributes{};
  attributes->location.id = 0;
  attributes->location.type = a.size == 0 ? ACL_MEM_LOCATION_TYPE_UNREGISTERED
                              : a.host    ? ACL_MEM_LOCATION_TYPE_HOST
                                          : ACL_MEM_LOCATION_TYPE_DEVICE;
  attributes->pageSize = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  return ACL_SUCCESS;
}

// One device (the CPU): device 0 has no peer, and no other device id exists.
aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  if (!canAccessPeer) return rt_fail("aclrtDeviceCanAccessPeer: canAccessPeer is null");
  if (deviceId != 0 || peerDeviceId != 0)
    return rt_fail(concat("aclrtDeviceCanAccessPeer: there is one device (0, the CPU), got deviceId ", deviceId,
                          ", peerDeviceId ", peerDeviceId), ACL_ERROR_RT_INVALID_DEVICEID);
  *canAccessPeer = 0;  // a device is not its own peer
  return ACL_SUCCESS;
}
aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t) {
  return rt_fail(concat("aclrtDeviceEnablePeerAccess: there is one device (0, the CPU) and so no peer device; got "
                        "peerDeviceId ", peerDeviceId), ACL_ERROR_RT_INVALID_DEVICEID);
}
aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId) {
  return rt_fail(concat("aclrtDeviceDisablePeerAccess: there is one device (0, the CPU) and so no peer device; got "
                        "peerDeviceId ", peerDeviceId), ACL_ERROR_RT_INVALID_DEVICEID);
}

aclError aclrtFree(void* devPtr) {
  if (!devPtr) return rt_fail("aclrtFree: devPtr is null");
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    if (g_allocations.erase(reinterpret_cast<uintptr_t>(devPtr)) != 1)
      return rt_fail("aclrtFree: pointer was not returned by aclrtMalloc (or was already freed)");
  }
  std::free(devPtr);
  return ACL_SUCCESS;
}
aclError aclrtFreeHost(void* hostPtr) { return aclrtFree(hostPtr); }

// The device-side pointer p of a copy or memset must lie inside a live allocation and the whole
// [p, p + count) inside that same allocation. A host-side pointer is the caller's memory; only if it
// happens to lie inside an allocation is its range checked too.
enum class Side { kHost, kDevice };

static aclError check_range(const char* fn, const char* what, const void* p, size_t count, Side side) {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  const auto [start, allocation] = allocation_containing(p);
  const size_t size = allocation.size;
  if (size == 0) {
    if (side == Side::kHost) return ACL_SUCCESS;
    return rt_fail(concat(fn, ": ", what, " ", p, " is not inside any live aclrtMalloc allocation"));
  }
  const size_t offset = reinterpret_cast<uintptr_t>(p) - start;
  if (count > size - offset)
    return rt_fail(concat(fn, ": ", what, " range of ", count, " bytes at offset ", offset,
                          " runs past its aclrtMalloc allocation of ", size, " bytes"));
  return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  if (!dst || !src) return rt_fail("aclrtMemcpy: dst and src must not be null");
  const int k = static_cast<int>(kind);
  if (k < 0 || k > ACL_MEMCPY_DEFAULT) return rt_fail(concat("aclrtMemcpy: unknown kind ", k));
  if (count > destMax) return rt_fail(concat("aclrtMemcpy: count ", count, " > destMax ", destMax));
  const Side dst_side = (k == ACL_MEMCPY_HOST_TO_DEVICE || k == ACL_MEMCPY_DEVICE_TO_DEVICE) ? Side::kDevice : Side::kHost;
  const Side src_side = (k == ACL_MEMCPY_DEVICE_TO_HOST || k == ACL_MEMCPY_DEVICE_TO_DEVICE) ? Side::kDevice : Side::kHost;
  if (aclError e = check_range("aclrtMemcpy", "dst", dst, count, dst_side)) return e;
  if (aclError e = check_range("aclrtMemcpy", "src", src, count, src_side)) return e;
  if (count) std::memmove(dst, src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (!devPtr) return rt_fail("aclrtMemset: devPtr is null");
  if (count > maxCount) return rt_fail(concat("aclrtMemset: count ", count, " > maxCount ", maxCount));
  if (aclError e = check_range("aclrtMemset", "devPtr", devPtr, count, Side::kDevice)) return e;
  std::memset(devPtr, value, count);
  return ACL_SUCCESS;
}

// Streams are synchronous: the async forms complete before returning.
aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  if (aclError e = check_stream("aclrtMemcpyAsync", stream)) return e;
  return aclrtMemcpy(dst, destMax, src, count, kind);
}
aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  if (aclError e = check_stream("aclrtMemsetAsync", stream)) return e;
  return aclrtMemset(devPtr, maxCount, value, count);
}

aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  if (!value) return rt_fail("aclrtGetSysParamOpt: value is null");
  if (opt != ACL_OPT_DETERMINISTIC) return rt_fail(concat("aclrtGetSysParamOpt: unknown option ", static_cast<int>(opt)));
  *value = 1;  // every tilegrad operator is deterministic
  return ACL_SUCCESS;
}
aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t) {
  if (opt != ACL_OPT_DETERMINISTIC) return rt_fail(concat("aclrtSetSysParamOpt: unknown option ", static_cast<int>(opt)));
  return ACL_SUCCESS;
}
aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value) { return aclrtSetSysParamOpt(opt, value); }

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  auto bad = [](const std::string& m) -> aclTensor* { set_last_error("aclCreateTensor: " + m); return nullptr; };
  if (viewDimsNum > 64) return bad(concat("viewDimsNum ", viewDimsNum, " is not a plausible rank"));
  if (storageDimsNum > 64) return bad(concat("storageDimsNum ", storageDimsNum, " is not a plausible rank"));
  if (viewDimsNum && !viewDims) return bad("viewDims is null but viewDimsNum is " + std::to_string(viewDimsNum));
  if (storageDimsNum && !storageDims) return bad("storageDims is null but storageDimsNum is " + std::to_string(storageDimsNum));
  if (offset < 0) return bad(concat("offset must be >= 0, got ", offset));
  if (tilegrad::dtype_size(static_cast<tilegrad::DType>(dataType)) == 0)
    return bad(concat("dataType ", static_cast<int>(dataType), " is not a data type tilegrad knows"));
  auto* t = new (std::nothrow) aclTensor;
  if (!t) return bad("out of memory");
  t->view_dims.assign(viewDims, viewDims + viewDimsNum);
  if (stride) t->strides.assign(stride, stride + viewDimsNum);
  t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
  for (int64_t d : t->view_dims)
    if (d < 0) { delete t; return bad(concat("negative view dimension in ", tilegrad::shape_str(std::vector<int64_t>(viewDims, viewDims + viewDimsNum)))); }
  for (int64_t d : t->storage_dims)
    if (d < 0) { delete t; return bad("negative storage dimension"); }
  if (!stride && !contiguous_strides(t->view_dims, &t->strides)) {
    const std::string dims = tilegrad::shape_str(t->view_dims);
    delete t;
    return bad(concat("the contiguous strides of view dims ", dims, " overflow int64"));
  }
  t->offset = offset;
  t->format = static_cast<int32_t>(format);
  t->dtype = static_cast<int32_t>(dataType);
  t->data = tensorData;
  return t;
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

static aclnnStatus get_dims(const char* fn, const aclTensor* t, const std::vector<int64_t>& dims, int64_t** out,
                            uint64_t* num) {
  return guard(fn, [&] {
    require_not_null(fn, "tensor", t);
    require_not_null(fn, "out-pointer", out);
    require_not_null(fn, "count out-pointer", num);
    *out = static_cast<int64_t*>(std::malloc(std::max<size_t>(dims.size(), 1) * sizeof(int64_t)));
    if (!*out) throw std::bad_alloc();
    std::copy(dims.begin(), dims.end(), *out);
    *num = dims.size();
  });
}

// The returned arrays are malloc'd; the caller releases them with free().
aclnnStatus aclGetViewShape(const aclTensor* t, int64_t** viewDims, uint64_t* n) {
  return get_dims("aclGetViewShape", t, t ? t->view_dims : std::vector<int64_t>{}, viewDims, n);
}
aclnnStatus aclGetViewStrides(const aclTensor* t, int64_t** stridesValue, uint64_t* n) {
  return get_dims("aclGetViewStrides", t, t ? t->strides : std::vector<int64_t>{}, stridesValue, n);
}
aclnnStatus aclGetStorageShape(const aclTensor* t, int64_t** storageDims, uint64_t* n) {
  return get_dims("aclGetStorageShape", t, t ? t->storage_dims : std::vector<int64_t>{}, storageDims, n);
}
aclnnStatus aclGetViewOffset(const aclTensor* t, int64_t* offset) {
  return guard("aclGetViewOffset", [&] {
    require_not_null("aclGetViewOffset", "tensor", t);
    require_not_null("aclGetViewOffset", "offset", offset);
    *offset = t->offset;
  });
}
aclnnStatus aclGetFormat(const aclTensor* t, aclFormat* format) {
  return guard("aclGetFormat", [&] {
    require_not_null("aclGetFormat", "tensor", t);
    require_not_null("aclGetFormat", "format", format);
    *format = static_cast<aclFormat>(t->format);
  });
}
aclnnStatus aclGetDataType(const aclTensor* t, aclDataType* dataType) {
  return guard("aclGetDataType", [&] {
    require_not_null("aclGetDataType", "tensor", t);
    require_not_null("aclGetDataType", "dataType", dataType);
    *dataType = static_cast<aclDataType>(t->dtype);
  });
}

}  // extern "C"
