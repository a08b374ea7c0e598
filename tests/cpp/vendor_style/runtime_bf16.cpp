/* A CANN program in the style of the vendor's examples (C++11) using the wider runtime around an
 * operator: a context, events timing the launch, pinned host memory (aclrtMallocHost), async copies
 * and memset on a stream, memory info, the SoC name, aclFloat16 conversions, the aclnn argument
 * objects (aclIntArray, aclFloatArray, aclBoolArray, aclScalar, aclTensorList) and the tensor getters.
 * The operator is aclnnSiluBackward on bfloat16 data held as op::bfloat16. Prints "result[i] is: v";
 * returns non-zero on any failed call or wrong value of a runtime query. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclnn/opdev/bfloat16.h"
#include "aclnn_silu_backward.h"
#include "sample_common.h"  // CHECK_RET, LOG_PRINT, CHECK_ACL

int CheckHelpers() {
  // aclFloat16 conversions round to nearest even.
  CHECK_RET(aclFloatToFloat16(1.0f) == 0x3c00, LOG_PRINT("aclFloatToFloat16(1)\n"); return 1);
  CHECK_RET(aclFloatToFloat16(65520.0f) == 0x7c00, LOG_PRINT("aclFloatToFloat16(65520)\n"); return 1);
  CHECK_RET(aclFloat16ToFloat(0x3555) == 0.333251953125f, LOG_PRINT("aclFloat16ToFloat\n"); return 1);

  int64_t dims[3] = {4, 5, 6};
  aclIntArray* intArray = aclCreateIntArray(dims, 3);
  float floats[2] = {0.5f, 2.0f};
  aclFloatArray* floatArray = aclCreateFloatArray(floats, 2);
  bool flags[4] = {true, false, true, true};
  aclBoolArray* boolArray = aclCreateBoolArray(flags, 4);
  float alphaValue = 1.5f;
  aclScalar* alpha = aclCreateScalar(&alphaValue, ACL_FLOAT);
  CHECK_RET(intArray && floatArray && boolArray && alpha, LOG_PRINT("aclCreate* failed\n"); return 1);
  uint64_t size = 0;
  CHECK_ACL(aclGetIntArraySize(intArray, &size));
  CHECK_RET(size == 3, return 1);
  CHECK_ACL(aclGetFloatArraySize(floatArray, &size));
  CHECK_RET(size == 2, return 1);
  CHECK_ACL(aclGetBoolArraySize(boolArray, &size));
  CHECK_RET(size == 4, return 1);

  // A tensor list owns its tensors.
  std::vector<float> storage(30 * 7, 0.0f);
  std::vector<int64_t> viewShape = {5, 6};
  std::vector<int64_t> strides = {1, 5};  // column-major view
  std::vector<int64_t> storageShape = {30};
  aclTensor* a = aclCreateTensor(viewShape.data(), 2, ACL_FLOAT, strides.data(), 7, ACL_FORMAT_ND,
                                 storageShape.data(), 1, storage.data());
  aclTensor* b = aclCreateTensor(viewShape.data(), 2, ACL_BF16, strides.data(), 0, ACL_FORMAT_NCHW,
                                 storageShape.data(), 1, storage.data());
  CHECK_RET(a && b, return 1);
  int64_t* got = nullptr;
  uint64_t n = 0;
  CHECK_ACL(aclGetViewShape(a, &got, &n));
  CHECK_RET(n == 2 && got[0] == 5 && got[1] == 6, return 1);
  free(got);
  CHECK_ACL(aclGetViewStrides(a, &got, &n));
  CHECK_RET(n == 2 && got[0] == 1 && got[1] == 5, return 1);
  free(got);
  CHECK_ACL(aclGetStorageShape(a, &got, &n));
  CHECK_RET(n == 1 && got[0] == 30, return 1);
  free(got);
  int64_t offset = 0;
  CHECK_ACL(aclGetViewOffset(a, &offset));
  CHECK_RET(offset == 7, return 1);
  aclDataType dataType;
  CHECK_ACL(aclGetDataType(b, &dataType));
  CHECK_RET(dataType == ACL_BF16, return 1);
  aclFormat format;
  CHECK_ACL(aclGetFormat(b, &format));
  CHECK_RET(format == ACL_FORMAT_NCHW, return 1);
  aclTensor* list[] = {a, b};
  aclTensorList* tensorList = aclCreateTensorList(list, 2);
  CHECK_ACL(aclGetTensorListSize(tensorList, &size));
  CHECK_RET(size == 2, return 1);

  CHECK_ACL(aclDestroyTensorList(tensorList));  // destroys a and b
  CHECK_ACL(aclDestroyScalar(alpha));
  CHECK_ACL(aclDestroyIntArray(intArray));
  CHECK_ACL(aclDestroyFloatArray(floatArray));
  CHECK_ACL(aclDestroyBoolArray(boolArray));
  return 0;
}

int main() {
  int32_t deviceId = 0;
  CHECK_ACL(aclInit(nullptr));
  uint32_t count = 0;
  CHECK_ACL(aclrtGetDeviceCount(&count));
  CHECK_RET(count == 1, LOG_PRINT("device count %u\n", count); return 1);
  CHECK_ACL(aclrtSetDevice(deviceId));
  aclrtContext context;
  CHECK_ACL(aclrtCreateContext(&context, deviceId));
  CHECK_ACL(aclrtSetCurrentContext(context));
  aclrtContext current = nullptr;
  CHECK_ACL(aclrtGetCurrentContext(&current));
  CHECK_RET(current == context, return 1);
  int32_t device = -1;
  CHECK_ACL(aclrtGetDevice(&device));
  CHECK_RET(device == 0, return 1);
  aclrtStream stream;
  CHECK_ACL(aclrtCreateStream(&stream));
  const char* soc = aclrtGetSocName();
  CHECK_RET(soc != nullptr && soc[0] != '\0', return 1);
  size_t freeBytes = 0, totalBytes = 0;
  CHECK_ACL(aclrtGetMemInfo(ACL_HBM_MEM, &freeBytes, &totalBytes));
  CHECK_RET(totalBytes > 0 && freeBytes <= totalBytes, return 1);
  CHECK_RET(CheckHelpers() == 0, return 1);

  const int64_t size = 6;
  std::vector<int64_t> shape = {2, 3};
  std::vector<int64_t> strides = {3, 1};
  const size_t bytes = size * sizeof(op::bfloat16);
  op::bfloat16* hostIn = nullptr;
  op::bfloat16* hostOut = nullptr;
  CHECK_ACL(aclrtMallocHost(reinterpret_cast<void**>(&hostIn), 2 * bytes));
  CHECK_ACL(aclrtMallocHost(reinterpret_cast<void**>(&hostOut), bytes));
  const float gradValues[size] = {1, 1, 1, -1, 0.5f, 2};
  const float selfValues[size] = {1, 2, 3, -0.75f, 5, -2.5f};
  for (int64_t i = 0; i < size; ++i) {
    hostIn[i] = gradValues[i];
    hostIn[size + i] = selfValues[i];
  }
  void* gradOutputAddr = nullptr;
  void* selfAddr = nullptr;
  void* gradInputAddr = nullptr;
  CHECK_ACL(aclrtMalloc(&gradOutputAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMalloc(&selfAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMalloc(&gradInputAddr, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMemcpyAsync(gradOutputAddr, bytes, hostIn, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  CHECK_ACL(aclrtMemcpyAsync(selfAddr, bytes, hostIn + size, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  CHECK_ACL(aclrtMemsetAsync(gradInputAddr, bytes, 0xff, bytes, stream));
  aclTensor* gradOutput = aclCreateTensor(shape.data(), 2, ACL_BF16, strides.data(), 0, ACL_FORMAT_ND,
                                          shape.data(), 2, gradOutputAddr);
  aclTensor* self = aclCreateTensor(shape.data(), 2, ACL_BF16, strides.data(), 0, ACL_FORMAT_ND, shape.data(), 2,
                                    selfAddr);
  aclTensor* gradInput = aclCreateTensor(shape.data(), 2, ACL_BF16, strides.data(), 0, ACL_FORMAT_ND,
                                         shape.data(), 2, gradInputAddr);

  aclrtEvent start, end;
  CHECK_ACL(aclrtCreateEvent(&start));
  CHECK_ACL(aclrtCreateEvent(&end));
  CHECK_ACL(aclrtRecordEvent(start, stream));
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;
  CHECK_ACL(aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput, &workspaceSize, &executor));
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    CHECK_ACL(aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
  }
  CHECK_ACL(aclnnSiluBackward(workspaceAddr, workspaceSize, executor, stream));
  CHECK_ACL(aclrtRecordEvent(end, stream));
  CHECK_ACL(aclrtSynchronizeEvent(end));
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  CHECK_ACL(aclrtQueryEventStatus(end, &status));
  CHECK_RET(status == ACL_EVENT_RECORDED_STATUS_COMPLETE, return 1);
  float ms = -1.0f;
  CHECK_ACL(aclrtEventElapsedTime(&ms, start, end));
  CHECK_RET(ms >= 0.0f, return 1);
  CHECK_ACL(aclrtSynchronizeStream(stream));
  CHECK_ACL(aclrtSynchronizeDevice());
  CHECK_ACL(aclrtMemcpyAsync(hostOut, bytes, gradInputAddr, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
  CHECK_ACL(aclrtSynchronizeStream(stream));
  for (int64_t i = 0; i < size; ++i) {
    LOG_PRINT("result[%ld] is: %.9g\n", static_cast<long>(i), static_cast<float>(hostOut[i]));
  }

  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(gradInput);
  CHECK_ACL(aclrtDestroyEvent(start));
  CHECK_ACL(aclrtDestroyEvent(end));
  aclrtFree(gradOutputAddr);
  aclrtFree(selfAddr);
  aclrtFree(gradInputAddr);
  if (workspaceSize > 0) {
    aclrtFree(workspaceAddr);
  }
  CHECK_ACL(aclrtFreeHost(hostIn));
  CHECK_ACL(aclrtFreeHost(hostOut));
  CHECK_ACL(aclrtDestroyStream(stream));
  CHECK_ACL(aclrtDestroyContext(context));
  CHECK_ACL(aclrtResetDevice(deviceId));
  CHECK_ACL(aclFinalize());
  return 0;
}
