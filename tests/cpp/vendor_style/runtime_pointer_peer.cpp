/* Memory queries by pointer and device peer access, as multi-device CANN programs call them (C++11,
 * vendor headers only). aclrtPointerGetAttributes: DEVICE (id 0) anywhere inside an aclrtMalloc
 * allocation, HOST inside an aclrtMallocHost one, UNREGISTERED for other memory (and after aclrtFree),
 * pageSize > 0, reserved words 0. Peer access, answered honestly for the one device there is: device 0
 * cannot access itself as a peer, device 1 does not exist (ACL_ERROR_RT_INVALID_DEVICEID), enabling or
 * disabling peer access names no existing peer (ACL_ERROR_RT_INVALID_DEVICEID). Non-zero exit on any failure. */
#include <cstring>
#include <vector>

#include "sample_common.h"

namespace {

int ExpectLocation(const char* what, const void* ptr, aclrtMemLocationType want) {
  aclrtPtrAttributes attributes;
  std::memset(&attributes, 0xff, sizeof(attributes));
  CHECK_ACL(aclrtPointerGetAttributes(ptr, &attributes));
  LOG_PRINT("%s: location type %d id %u, pageSize %u\n", what, static_cast<int>(attributes.location.type),
            attributes.location.id, attributes.pageSize);
  const bool ok = attributes.location.type == want && attributes.pageSize > 0 && attributes.rsv[0] == 0 &&
                  attributes.rsv[3] == 0 && (want != ACL_MEM_LOCATION_TYPE_DEVICE || attributes.location.id == 0);
  CHECK_RET(ok, LOG_PRINT("FAIL %s: expected location type %d\n", what, static_cast<int>(want)); return 1);
  return 0;
}

int ExpectStatus(const char* what, aclError got, aclError want) {
  LOG_PRINT("%s: %d %s\n", what, got, got == ACL_SUCCESS ? "" : RecentErrMsg());
  CHECK_RET(got == want, LOG_PRINT("FAIL %s: expected %d\n", what, want); return 1);
  return 0;
}

int PointerPeerSample(aclrtStream) {
  void* device = nullptr;
  void* host = nullptr;
  CHECK_ACL(aclrtMalloc(&device, 1000, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclrtMallocHost(&host, 256));
  std::vector<char> plain(64);
  int failures = ExpectLocation("aclrtMalloc start", device, ACL_MEM_LOCATION_TYPE_DEVICE) +
                 ExpectLocation("aclrtMalloc last byte", static_cast<char*>(device) + 999, ACL_MEM_LOCATION_TYPE_DEVICE) +
                 ExpectLocation("aclrtMallocHost", static_cast<char*>(host) + 17, ACL_MEM_LOCATION_TYPE_HOST) +
                 ExpectLocation("std::vector", plain.data(), ACL_MEM_LOCATION_TYPE_UNREGISTERED);
  aclrtPtrAttributes attributes;
  failures += ExpectStatus("aclrtPointerGetAttributes(NULL)", aclrtPointerGetAttributes(nullptr, &attributes),
                           ACL_ERROR_INVALID_PARAM);
  failures += ExpectStatus("aclrtPointerGetAttributes(ptr, NULL)", aclrtPointerGetAttributes(device, nullptr),
                           ACL_ERROR_INVALID_PARAM);
  CHECK_ACL(aclrtFreeHost(host));
  CHECK_ACL(aclrtFree(device));
  failures += ExpectLocation("freed aclrtMalloc memory", device, ACL_MEM_LOCATION_TYPE_UNREGISTERED);

  uint32_t count = 0;
  CHECK_ACL(aclrtGetDeviceCount(&count));
  int32_t canAccess = -1;
  failures += ExpectStatus("aclrtDeviceCanAccessPeer(0, 0)", aclrtDeviceCanAccessPeer(&canAccess, 0, 0), ACL_SUCCESS);
  if (count != 1 || canAccess != 0) {
    LOG_PRINT("FAIL: %u devices, device 0 can access itself as a peer: %d\n", count, canAccess);
    ++failures;
  }
  failures += ExpectStatus("aclrtDeviceCanAccessPeer(0, 1)", aclrtDeviceCanAccessPeer(&canAccess, 0, 1),
                           ACL_ERROR_RT_INVALID_DEVICEID);
  failures += ExpectStatus("aclrtDeviceCanAccessPeer(NULL)", aclrtDeviceCanAccessPeer(nullptr, 0, 0),
                           ACL_ERROR_INVALID_PARAM);
  failures += ExpectStatus("aclrtDeviceEnablePeerAccess(1)", aclrtDeviceEnablePeerAccess(1, 0),
                           ACL_ERROR_RT_INVALID_DEVICEID);
  failures += ExpectStatus("aclrtDeviceDisablePeerAccess(1)", aclrtDeviceDisablePeerAccess(1),
                           ACL_ERROR_RT_INVALID_DEVICEID);
  return failures;
}

}  // namespace

int main() { return RunSample("runtime_pointer_peer", PointerPeerSample); }
