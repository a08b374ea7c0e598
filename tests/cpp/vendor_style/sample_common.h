/* What every CANN sample program in this folder needs, written once (the vendor's own samples share a
 * common header the same way): the CHECK_RET / LOG_PRINT / CHECK_ACL macros, device and stream set-up
 * (Init, Finalize, RunSample), device tensors made from host data (CreateAclTensor, SampleTensors), the
 * two-phase launch (LaunchAndWait) and the comparison with a float64 reference computed in the program
 * (CheckClose). C++11 and only the public acl / aclnn headers, so a program using it builds unchanged
 * against the vendor's toolkit. */
#ifndef TILEGRAD_TESTS_CPP_VENDOR_STYLE_SAMPLE_COMMON_H_
#define TILEGRAD_TESTS_CPP_VENDOR_STYLE_SAMPLE_COMMON_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

// Runs return_expr (typically a log line and a return) when cond is false.
#define CHECK_RET(cond, return_expr) do { if (!(cond)) { return_expr; } } while (0)
#define LOG_PRINT(message, ...) do { printf(message, ##__VA_ARGS__); } while (0)

// The vendor's last error text, never null (printf must not receive a null %s).
inline const char* RecentErrMsg() {
  const char* message = aclGetRecentErrMsg();
  return message ? message : "";
}

// Returns 1 from the calling function when an acl / aclnn call fails, naming the call and the error.
#define CHECK_ACL(expr)                                                                                   \
  do {                                                                                                    \
    const int status_ = static_cast<int>(expr);                                                           \
    CHECK_RET(status_ == 0, LOG_PRINT("%s failed. ERROR: %d %s\n", #expr, status_, RecentErrMsg()); return 1); \
  } while (0)

inline int64_t GetShapeSize(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) count *= shape[d];
  return count;
}

// AscendCL start-up: aclInit, the device, one stream.
inline int Init(int32_t deviceId, aclrtStream* stream) {
  CHECK_ACL(aclInit(nullptr));
  CHECK_ACL(aclrtSetDevice(deviceId));
  CHECK_ACL(aclrtCreateStream(stream));
  return 0;
}

inline void Finalize(int32_t deviceId, aclrtStream stream) {
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
  aclFinalize();
}

// Device memory holding hostData and a contiguous ND aclTensor of `shape` over it (a 0-d shape holds
// one element). T must be the C++ type of dataType's elements.
template <typename T>
int CreateAclTensor(const std::vector<T>& hostData, const std::vector<int64_t>& shape, void** deviceAddr,
                    aclDataType dataType, aclTensor** tensor) {
  const int64_t count = GetShapeSize(shape);
  CHECK_RET(static_cast<int64_t>(hostData.size()) == count,
            LOG_PRINT("CreateAclTensor: %zu host values for %lld elements\n", hostData.size(),
                      static_cast<long long>(count));
            return 1);
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  CHECK_ACL(aclrtMalloc(deviceAddr, bytes > 0 ? bytes : 1, ACL_MEM_MALLOC_HUGE_FIRST));
  if (bytes > 0) CHECK_ACL(aclrtMemcpy(*deviceAddr, bytes, hostData.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  std::vector<int64_t> strides(shape.size(), 1);  // row-major: each stride is the product of the dims after it
  for (size_t d = shape.size(); d > 1; --d) strides[d - 2] = shape[d - 1] * strides[d - 1];
  *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                            shape.size(), *deviceAddr);
  CHECK_RET(*tensor != nullptr, LOG_PRINT("aclCreateTensor failed. %s\n", RecentErrMsg()); return 1);
  return 0;
}

// The device tensors of one sample: Create makes each from host data, Read copies one back, and the
// destructor destroys every tensor and frees its memory (before Finalize, see RunSample).
class SampleTensors {
 public:
  SampleTensors() {}
  SampleTensors(const SampleTensors&) = delete;
  SampleTensors& operator=(const SampleTensors&) = delete;
  ~SampleTensors() {
    for (size_t k = 0; k < entries_.size(); ++k) {
      if (entries_[k].tensor) aclDestroyTensor(entries_[k].tensor);
      if (entries_[k].deviceAddr) aclrtFree(entries_[k].deviceAddr);
    }
  }

  // Null when the memory or the tensor could not be made (the reason is printed).
  template <typename T>
  aclTensor* Create(const std::vector<T>& hostData, const std::vector<int64_t>& shape, aclDataType dataType) {
    Entry entry;
    entry.shape = shape;
    entry.elementSize = sizeof(T);
    const int ret = CreateAclTensor(hostData, shape, &entry.deviceAddr, dataType, &entry.tensor);
    entries_.push_back(entry);
    return ret == 0 ? entry.tensor : nullptr;
  }

  // An output: zeros of `shape`.
  template <typename T>
  aclTensor* Zeros(const std::vector<int64_t>& shape, aclDataType dataType) {
    return Create(std::vector<T>(static_cast<size_t>(GetShapeSize(shape)), T(0)), shape, dataType);
  }

  // Copies the device data of `tensor` (made by Create) into *hostData.
  template <typename T>
  int Read(const aclTensor* tensor, std::vector<T>* hostData) const {
    const Entry* entry = Find(tensor);
    CHECK_RET(entry != nullptr, LOG_PRINT("Read: not a tensor of this sample\n"); return 1);
    CHECK_RET(entry->elementSize == sizeof(T),
              LOG_PRINT("Read: element size %zu != %zu\n", sizeof(T), entry->elementSize); return 1);
    hostData->assign(static_cast<size_t>(GetShapeSize(entry->shape)), T());
    const size_t bytes = hostData->size() * sizeof(T);
    if (bytes > 0) CHECK_ACL(aclrtMemcpy(hostData->data(), bytes, entry->deviceAddr, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    return 0;
  }

  // The device memory under `tensor` (made by Create), e.g. for aclSetInputTensorAddr; null if unknown.
  void* DeviceAddr(const aclTensor* tensor) const {
    const Entry* entry = Find(tensor);
    return entry ? entry->deviceAddr : nullptr;
  }

 private:
  struct Entry {
    Entry() : tensor(nullptr), deviceAddr(nullptr), elementSize(0) {}
    aclTensor* tensor;
    void* deviceAddr;
    std::vector<int64_t> shape;
    size_t elementSize;
  };
  const Entry* Find(const aclTensor* tensor) const {
    for (size_t k = 0; k < entries_.size(); ++k)
      if (tensor != nullptr && entries_[k].tensor == tensor) return &entries_[k];
    return nullptr;
  }

  std::vector<Entry> entries_;
};

typedef aclnnStatus (*AclnnLaunch)(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);

// The rest of a two-phase call once aclnnXxxGetWorkspaceSize returned getWorkspaceStatus: allocates the
// workspace it asked for, runs aclnnXxx (`launch`), waits for the stream, frees the workspace.
inline int LaunchAndWait(const char* name, aclnnStatus getWorkspaceStatus, uint64_t workspaceSize,
                         aclOpExecutor* executor, AclnnLaunch launch, aclrtStream stream) {
  CHECK_RET(getWorkspaceStatus == ACL_SUCCESS,
            LOG_PRINT("%sGetWorkspaceSize failed. ERROR: %d %s\n", name, getWorkspaceStatus, RecentErrMsg());
            return 1);
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) CHECK_ACL(aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
  const aclnnStatus ret = launch(workspaceAddr, workspaceSize, executor, stream);
  const aclError synchronized = ret == ACL_SUCCESS ? aclrtSynchronizeStream(stream) : ACL_SUCCESS;
  if (workspaceAddr) aclrtFree(workspaceAddr);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("%s failed. ERROR: %d %s\n", name, ret, RecentErrMsg()); return 1);
  CHECK_RET(synchronized == ACL_SUCCESS, LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", synchronized);
            return 1);
  return 0;
}

// Deterministic sample data: scale * sin(0.7 i + phase) + offset, i = 0..count-1.
inline std::vector<double> Wave(size_t count, double scale, double phase, double offset = 0.0) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = scale * std::sin(0.7 * static_cast<double>(i) + phase) + offset;
  return values;
}

// values stored as T (rounded once: float, op::fp16_t, op::bfloat16 ...).
template <typename T>
std::vector<T> StoredAs(const std::vector<double>& values) {
  std::vector<T> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) stored[i] = T(static_cast<float>(values[i]));
  return stored;
}

// The exact value of each stored element, for the float64 reference.
template <typename T>
std::vector<double> AsDouble(const std::vector<T>& stored) {
  std::vector<double> values(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) values[i] = static_cast<double>(static_cast<float>(stored[i]));
  return values;
}

inline double MaxAbs(const std::vector<double>& values) {
  double largest = 0.0;
  for (size_t i = 0; i < values.size(); ++i) largest = std::fmax(largest, std::fabs(values[i]));
  return largest;
}

// Prints each result as the vendor's samples do ("<what> result[i] is: v") and compares it with the
// float64 reference: |got - want| <= atol + rtol * |want| (a NaN never passes). Returns the mismatches.
template <typename T>
int CheckClose(const char* what, const std::vector<T>& got, const std::vector<double>& want, double rtol,
               double atol) {
  CHECK_RET(got.size() == want.size(),
            LOG_PRINT("FAIL %s: %zu results, the reference has %zu\n", what, got.size(), want.size()); return 1);
  int mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double value = static_cast<double>(static_cast<float>(got[i]));
    LOG_PRINT("%s result[%zu] is: %.9g\n", what, i, value);
    if (!(std::fabs(value - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      LOG_PRINT("FAIL %s[%zu]: %.9g, reference %.9g\n", what, i, value, want[i]);
      ++mismatches;
    }
  }
  return mismatches;
}

// The frame of a sample: Init, body(stream) (its tensors are gone when it returns), Finalize. body
// returns the number of failures (failed calls, values off their reference); the exit status is 0 only
// when there were none.
inline int RunSample(const char* name, int (*body)(aclrtStream stream)) {
  const int32_t deviceId = 0;
  aclrtStream stream = nullptr;
  CHECK_RET(Init(deviceId, &stream) == 0, LOG_PRINT("Init acl failed\n"); return 1);
  const int failures = body(stream);
  Finalize(deviceId, stream);
  LOG_PRINT("%s: %s\n", name, failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

#endif  // TILEGRAD_TESTS_CPP_VENDOR_STYLE_SAMPLE_COMMON_H_
