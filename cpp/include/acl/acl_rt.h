/* aclrt* runtime on the CPU: device 0 is the host, streams are synchronous, memory is host memory. */
#ifndef TILEGRAD_ACL_ACL_RT_H_
#define TILEGRAD_ACL_ACL_RT_H_

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
} aclrtMemMallocPolicy;

typedef enum {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

typedef enum { ACL_OPT_DETERMINISTIC = 0 } aclSysParamOpt;

typedef enum { ACL_DEVICE = 0, ACL_HOST = 1 } aclrtRunMode;

typedef enum {
  ACL_DDR_MEM = 0,
  ACL_HBM_MEM = 1,
  ACL_DDR_MEM_HUGE = 2,
  ACL_DDR_MEM_NORMAL = 3,
  ACL_HBM_MEM_HUGE = 4,
  ACL_HBM_MEM_NORMAL = 5,
  ACL_DDR_MEM_P2P_HUGE = 6,
  ACL_DDR_MEM_P2P_NORMAL = 7,
  ACL_HBM_MEM_P2P_HUGE = 8,
  ACL_HBM_MEM_P2P_NORMAL = 9
} aclrtMemAttr;

typedef enum {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum { ACL_CALLBACK_NO_BLOCK = 0, ACL_CALLBACK_BLOCK = 1 } aclrtCallbackBlockType;
typedef void (*aclrtCallback)(void* userData);

typedef enum {
  ACL_MEM_LOCATION_TYPE_HOST = 0,         /* aclrtMallocHost memory */
  ACL_MEM_LOCATION_TYPE_DEVICE = 1,       /* aclrtMalloc memory */
  ACL_MEM_LOCATION_TYPE_UNREGISTERED = 2  /* memory no acl call allocated */
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id; /* the device id (0) for device memory; not meaningful for host memory */
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef struct aclrtPtrAttributes {
  aclrtMemLocation location;
  uint32_t pageSize; /* bytes */
  uint32_t rsv[4];   /* 0 */
} aclrtPtrAttributes;

ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count);
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/* Always ACL_HOST: the "device" is this CPU. */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode* runMode);
/* "tilegrad-cpu" (there is no Ascend SoC). */
ACL_FUNC_VISIBILITY const char* aclrtGetSocName(void);

/* Contexts: device 0 has a default context; created contexts are handles a thread can make current.
 * Every context sees the same (host) memory and streams. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context);

/* Events: streams are synchronous, so a recorded event is complete at once; the recorded time is the
 * host clock's (aclrtEventElapsedTime measures between two records, in milliseconds). */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event);
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status);
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent);
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
/* 64-byte aligned host memory; allocations are tracked: a pointer on the device side of a copy
 * (dst of HOST_TO_DEVICE, src of DEVICE_TO_HOST, both of DEVICE_TO_DEVICE) and aclrtMemset's devPtr
 * must lie inside a live aclrtMalloc/aclrtMallocHost allocation, with the whole range inside it. */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr);
ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count);
/* count > destMax, a device-side pointer outside every allocation, or a range running past a tracked
 * allocation: ACL_ERROR_INVALID_PARAM, nothing written. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind);
/* The *Async forms run synchronously (the copy is done when they return); stream may be NULL. */
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                                              aclrtMemcpyKind kind, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                                              aclrtStream stream);
/* Free and total bytes of the machine's memory (attr is accepted for every aclrtMemAttr value). */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total);
/* Where ptr lies: DEVICE (id 0) inside a live aclrtMalloc allocation, HOST inside an aclrtMallocHost one,
 * UNREGISTERED otherwise; pageSize is the host's page size. NULL ptr or attributes: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtPointerGetAttributes(const void* ptr, aclrtPtrAttributes* attributes);

/* Peer access: there is one device, so it has no peer. aclrtDeviceCanAccessPeer(&can, 0, 0) answers 0 (a
 * device is not its own peer); any other device id is ACL_ERROR_RT_INVALID_DEVICEID. Enabling or
 * disabling access to a peer: ACL_ERROR_RT_INVALID_DEVICEID (there is no peer device to name). */
ACL_FUNC_VISIBILITY aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId);
ACL_FUNC_VISIBILITY aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);
ACL_FUNC_VISIBILITY aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId);

/* The wait timeout of operators, in seconds (0: never time out). Accepted and kept: streams here are
 * synchronous, so no operator ever waits. */
ACL_FUNC_VISIBILITY aclError aclrtSetOpWaitTimeout(uint32_t timeout);

/* Host callbacks on a stream, as the vendor's: aclrtSubscribeReport binds a thread (its pthread id) to
 * a stream (one thread per stream; ACL_ERROR_RT_STREAM_SUBSCRIBE for a second one), aclrtLaunchCallback
 * queues fn(userData) for that thread (ACL_ERROR_RT_STREAM_NO_CB_REG when the stream has none), and the
 * thread runs its queued callbacks in aclrtProcessReport(timeout ms, -1 = forever), which returns
 * ACL_ERROR_RT_REPORT_TIMEOUT when none came in time and ACL_ERROR_RT_THREAD_SUBSCRIBE for a thread
 * subscribed to no stream. Streams are synchronous, so a callback is queued after everything launched
 * before it has finished; ACL_CALLBACK_BLOCK makes the launching call wait until the callback has run
 * (the stream's later work comes after it), and aclrtSynchronizeStream waits for the stream's queued
 * callbacks (a call from the subscribed thread itself runs them in place). */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                                                 aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout);

/* Every operator is deterministic; the option reads 1 and accepts any value. */
ACL_FUNC_VISIBILITY aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t* value);
ACL_FUNC_VISIBILITY aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value);
ACL_FUNC_VISIBILITY aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value);

#ifdef __cplusplus
}
#endif

#endif /* TILEGRAD_ACL_ACL_RT_H_ */
