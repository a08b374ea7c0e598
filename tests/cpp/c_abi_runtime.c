/* The aclrt* CPU runtime through the C ABI, from C: init/finalize, device ids, streams, 64-byte
 * aligned tracked memory, aclrtMemcpy/aclrtMemset range checks, aclCreateTensor argument checks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "expect.h"

static void test_device_and_streams(void) {
  int32_t dev = -1;
  uint32_t count = 0;
  aclrtStream s1 = NULL, s2 = NULL;
  EXPECT(aclrtSetDevice(0) == ACL_SUCCESS);
  EXPECT_ERR(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID, "deviceId must be 0 (the CPU), got 1");
  EXPECT_ERR(aclrtSetDevice(-3), ACL_ERROR_RT_INVALID_DEVICEID, "got -3");
  EXPECT_ERR(aclrtResetDevice(7), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: deviceId must be 0");
  EXPECT(aclrtGetDevice(&dev) == ACL_SUCCESS && dev == 0);
  EXPECT(aclrtGetDeviceCount(&count) == ACL_SUCCESS && count == 1);
  EXPECT_ERR(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");

  EXPECT(aclrtCreateStream(&s1) == ACL_SUCCESS && s1 != NULL);
  EXPECT(aclrtCreateStream(&s2) == ACL_SUCCESS && s2 != NULL && s2 != s1);
  EXPECT_ERR(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  EXPECT(aclrtSynchronizeStream(s1) == ACL_SUCCESS);
  EXPECT(aclrtSynchronizeDevice() == ACL_SUCCESS);
  EXPECT(aclrtDestroyStream(s1) == ACL_SUCCESS);
  EXPECT_ERR(aclrtDestroyStream(s1), ACL_ERROR_RT_PARAM_INVALID, "not a live stream");
  EXPECT(aclrtDestroyStream(s2) == ACL_SUCCESS);

  int64_t v = -1;
  EXPECT(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v) == ACL_SUCCESS && v == 1);
  EXPECT(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0) == ACL_SUCCESS);
  EXPECT(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1) == ACL_SUCCESS);
  EXPECT(aclrtResetDevice(0) == ACL_SUCCESS);
}

static void test_memory(void) {
  static const size_t sizes[] = {1, 3, 63, 64, 65, 100, 4097, 1 << 20};
  void* ptrs[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    ptrs[i] = NULL;
    EXPECT(aclrtMalloc(&ptrs[i], sizes[i], ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    EXPECT(ptrs[i] != NULL && ((uintptr_t)ptrs[i] % 64) == 0);
    if (ptrs[i]) memset(ptrs[i], 0xab, sizes[i]); /* the whole size is usable (ASan checks) */
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) EXPECT(aclrtFree(ptrs[i]) == ACL_SUCCESS);
  EXPECT_ERR(aclrtFree(ptrs[0]), ACL_ERROR_INVALID_PARAM, "was not returned by aclrtMalloc");
  {
    void* p = NULL;
    EXPECT_ERR(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "size must be > 0");
    EXPECT_ERR(aclrtMalloc(NULL, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "devPtr is null");
    EXPECT_ERR(aclrtMalloc(&p, (size_t)1 << 62, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_BAD_ALLOC, "too large");
    EXPECT(aclrtMallocHost(&p, 10) == ACL_SUCCESS && ((uintptr_t)p % 64) == 0);
    EXPECT(aclrtFreeHost(p) == ACL_SUCCESS);
  }

  /* aclrtMemcpy: every kind works; count > destMax and ranges past an allocation are refused. */
  void* dev = NULL;
  float host[16], back[16];
  for (int i = 0; i < 16; ++i) host[i] = (float)i, back[i] = -1.0f;
  EXPECT(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_NORMAL_ONLY) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(back, sizeof back, dev, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
  EXPECT(memcmp(host, back, sizeof host) == 0);
  EXPECT(aclrtMemcpy(back, sizeof back, host, 8, ACL_MEMCPY_HOST_TO_HOST) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, sizeof host, dev, 0, ACL_MEMCPY_DEVICE_TO_DEVICE) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(back, sizeof back, dev, sizeof back, ACL_MEMCPY_DEFAULT) == ACL_SUCCESS);
  EXPECT_ERR(aclrtMemcpy(back, 8, host, 12, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM,
             "aclrtMemcpy: count 12 > destMax 8");
  EXPECT_ERR(aclrtMemcpy((char*)dev + 60, 8, host, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
             "dst range of 8 bytes at offset 60 runs past its aclrtMalloc allocation of 64 bytes");
  EXPECT_ERR(aclrtMemcpy(back, sizeof back, (char*)dev + 4, 64, ACL_MEMCPY_DEVICE_TO_HOST),
             ACL_ERROR_INVALID_PARAM, "src range of 64 bytes at offset 4 runs past");
  EXPECT_ERR(aclrtMemcpy(NULL, 8, host, 8, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM, "must not be null");
  EXPECT_ERR(aclrtMemcpy(back, 8, host, 8, (aclrtMemcpyKind)9), ACL_ERROR_INVALID_PARAM, "unknown kind 9");
  EXPECT(aclrtMemset(dev, 64, 0, 64) == ACL_SUCCESS);
  EXPECT_ERR(aclrtMemset(dev, 128, 0, 65), ACL_ERROR_INVALID_PARAM, "runs past");
  EXPECT_ERR(aclrtMemset(dev, 8, 0, 9), ACL_ERROR_INVALID_PARAM, "count 9 > maxCount 8");
  EXPECT(aclrtMemcpy(back, sizeof back, dev, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
  EXPECT(back[0] == 0.0f && back[15] == 0.0f);
  EXPECT(aclrtFree(dev) == ACL_SUCCESS);
}

static void test_create_tensor(void) {
  int64_t shape[2] = {2, 3}, strides[2] = {3, 1}, storage[1] = {6}, bad_shape[2] = {2, -1};
  float data[6] = {0};
  aclTensor* t = aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, data);
  EXPECT(t != NULL);
  if (t) {
    int64_t* dims = NULL;
    uint64_t n = 0;
    int64_t offset = -1;
    aclFormat fmt = ACL_FORMAT_UNDEFINED;
    aclDataType dt = ACL_DT_UNDEFINED;
    EXPECT(aclGetViewShape(t, &dims, &n) == ACLNN_SUCCESS && n == 2 && dims[0] == 2 && dims[1] == 3);
    free(dims);
    EXPECT(aclGetViewStrides(t, &dims, &n) == ACLNN_SUCCESS && n == 2 && dims[0] == 3 && dims[1] == 1);
    free(dims);
    EXPECT(aclGetStorageShape(t, &dims, &n) == ACLNN_SUCCESS && n == 1 && dims[0] == 6);
    free(dims);
    EXPECT(aclGetViewOffset(t, &offset) == ACLNN_SUCCESS && offset == 0);
    EXPECT(aclGetFormat(t, &fmt) == ACLNN_SUCCESS && fmt == ACL_FORMAT_ND);
    EXPECT(aclGetDataType(t, &dt) == ACLNN_SUCCESS && dt == ACL_FLOAT);
    EXPECT_ERR(aclGetViewShape(t, NULL, &n), ACLNN_ERR_PARAM_NULLPTR, "aclGetViewShape: out-pointer is null");
    EXPECT(aclDestroyTensor(t) == ACLNN_SUCCESS);
  }
  EXPECT_ERR(aclGetFormat(NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "aclGetFormat: tensor is null");

  /* Bad arguments: NULL and a message naming the argument. */
  EXPECT(aclCreateTensor(NULL, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, data) == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "aclCreateTensor: viewDims is null but viewDimsNum is 2") != NULL);
  /* NULL strides: contiguous row-major over the view dims (the vendor's samples rely on it). */
  t = aclCreateTensor(shape, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, storage, 1, data);
  EXPECT(t != NULL);
  if (t) {
    int64_t* got = NULL;
    uint64_t n = 0;
    EXPECT(aclGetViewStrides(t, &got, &n) == ACLNN_SUCCESS && n == 2 && got[0] == shape[1] && got[1] == 1);
    free(got);
    aclDestroyTensor(t);
  }
  EXPECT(aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, NULL, 1, data) == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "aclCreateTensor: storageDims is null but storageDimsNum is 1") != NULL);
  EXPECT(aclCreateTensor(bad_shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, data) == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "aclCreateTensor: negative view dimension in [2,-1]") != NULL);
  EXPECT(aclCreateTensor(shape, 2, ACL_FLOAT, strides, -1, ACL_FORMAT_ND, storage, 1, data) == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "aclCreateTensor: offset must be >= 0, got -1") != NULL);
  EXPECT(aclCreateTensor(shape, 1000, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, data) == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "viewDimsNum 1000") != NULL);
  /* A 0-d tensor needs no dims at all. */
  t = aclCreateTensor(NULL, 0, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, NULL, 0, data);
  EXPECT(t != NULL);
  aclDestroyTensor(t);
}

/* Hostile-testing defects, here so AddressSanitizer watches them: one byte just past a 64-byte
 * allocation must be refused (it was written: heap-buffer-overflow), in every direction. */
static void test_device_pointers_past_the_end(void) {
  void* dev = NULL;
  unsigned char byte = 0xAB, out = 0;
  EXPECT(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  EXPECT_ERR(aclrtMemcpy((char*)dev + 64, 1, &byte, 1, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
             "not inside any live aclrtMalloc allocation");
  EXPECT_ERR(aclrtMemcpy(&out, 1, (char*)dev + 64, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
             "src");
  EXPECT_ERR(aclrtMemcpy((char*)dev + 64, 1, dev, 1, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM, "dst");
  EXPECT_ERR(aclrtMemset((char*)dev + 64, 1, 0, 1), ACL_ERROR_INVALID_PARAM, "aclrtMemset: devPtr");
  EXPECT_ERR(aclrtMemcpyAsync((char*)dev + 64, 1, &byte, 1, ACL_MEMCPY_HOST_TO_DEVICE, NULL),
             ACL_ERROR_INVALID_PARAM, "not inside");
  EXPECT(aclrtMemcpy((char*)dev + 63, 1, &byte, 1, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(&out, 1, (char*)dev + 63, 1, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS && out == 0xAB);
  EXPECT(aclrtFree(dev) == ACL_SUCCESS);
  EXPECT_ERR(aclDestroyAclOpExecutor(NULL), ACLNN_ERR_PARAM_NULLPTR, "executor is null");
  EXPECT(strlen(aclGetRecentErrMsg()) == 0); /* read once: cleared */
}

int main(void) {
  EXPECT(aclInit(NULL) == ACL_SUCCESS);
  test_device_and_streams();
  test_memory();
  test_device_pointers_past_the_end();
  test_create_tensor();
  EXPECT(aclFinalize() == ACL_SUCCESS);
  return expect_report("c_abi_runtime");
}
