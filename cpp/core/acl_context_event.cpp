// The rest of the aclrt* runtime a CANN program calls around its operators, on the CPU: contexts and
// events are tracked handles (a stale or foreign handle is refused, never dereferenced), streams are
// synchronous so every recorded event is complete, memory info is the machine's. Also the half
// conversions of acl_base.h and aclnnInit/aclnnFinalize.
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <unordered_map>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnn/opdev/float_rounding.h"
#include "core/acl_runtime.h"
#include "core/error.h"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::core {
namespace {

// Handles are ids from one counter, never reused; 0x7000 is device 0's default context.
std::mutex g_mutex;
uintptr_t g_next_handle = 0x7010;
constexpr uintptr_t kDefaultContext = 0x7000;
std::set<uintptr_t> g_contexts;
thread_local uintptr_t t_current_context = kDefaultContext;

struct Event {
  bool recorded = false;
  std::chrono::steady_clock::time_point when;
};
std::unordered_map<uintptr_t, Event> g_events;

uintptr_t new_handle() {
  const uintptr_t id = g_next_handle;
  g_next_handle += 16;
  return id;
}

// The live event behind `event` (caller holds g_mutex), or nullptr with the error message set.
Event* find_event(const char* fn, aclrtEvent event) {
  auto it = g_events.find(reinterpret_cast<uintptr_t>(event));
  if (it == g_events.end()) {
    set_last_error(concat(fn, ": event ", event, " is not a live event"));
    return nullptr;
  }
  return &it->second;
}

}  // namespace
}  // namespace tilegrad::core

using namespace tilegrad::core;

extern "C" {

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  if (!runMode) return rt_fail("aclrtGetRunMode: runMode is null");
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

const char* aclrtGetSocName(void) { return "tilegrad-cpu"; }

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  if (!free || !total) return rt_fail("aclrtGetMemInfo: free and total must not be null");
  if (static_cast<int>(attr) < ACL_DDR_MEM || static_cast<int>(attr) > ACL_HBM_MEM_P2P_NORMAL)
    return rt_fail(concat("aclrtGetMemInfo: unknown attr ", static_cast<int>(attr)));
  const long page = sysconf(_SC_PAGESIZE);
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long avail = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || pages <= 0 || avail < 0)
    return rt_fail("aclrtGetMemInfo: the system does not report its memory", ACL_ERROR_RT_PARAM_INVALID);
  *total = static_cast<size_t>(pages) * static_cast<size_t>(page);
  *free = static_cast<size_t>(avail) * static_cast<size_t>(page);
  return ACL_SUCCESS;
}

// ---- contexts ----------------------------------------------------------------------------------

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  if (!context) return rt_fail("aclrtCreateContext: context is null");
  if (deviceId != 0)
    return rt_fail(concat("aclrtCreateContext: deviceId must be 0 (the CPU), got ", deviceId),
                   ACL_ERROR_RT_INVALID_DEVICEID);
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t id = new_handle();
  g_contexts.insert(id);
  *context = reinterpret_cast<aclrtContext>(id);
  t_current_context = id;  // as the vendor's: the new context becomes the thread's current one
  return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
  const auto id = reinterpret_cast<uintptr_t>(context);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_contexts.erase(id) != 1)
    return rt_fail(concat("aclrtDestroyContext: context ", context, " is not a live context from aclrtCreateContext"));
  if (t_current_context == id) t_current_context = kDefaultContext;
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  const auto id = reinterpret_cast<uintptr_t>(context);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (id != kDefaultContext && !g_contexts.count(id))
    return rt_fail(concat("aclrtSetCurrentContext: context ", context, " is not a live context"));
  t_current_context = id;
  return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (!context) return rt_fail("aclrtGetCurrentContext: context is null");
  *context = reinterpret_cast<aclrtContext>(t_current_context);
  return ACL_SUCCESS;
}

// ---- events ------------------------------------------------------------------------------------

aclError aclrtCreateEvent(aclrtEvent* event) {
  if (!event) return rt_fail("aclrtCreateEvent: event is null");
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t id = new_handle();
  g_events.emplace(id, Event{});
  *event = reinterpret_cast<aclrtEvent>(id);
  return ACL_SUCCESS;
}

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t) { return aclrtCreateEvent(event); }

aclError aclrtDestroyEvent(aclrtEvent event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_events.erase(reinterpret_cast<uintptr_t>(event)) != 1)
    return rt_fail(concat("aclrtDestroyEvent: event ", event, " is not a live event"));
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Event* e = find_event("aclrtRecordEvent", event);
  if (!e) return ACL_ERROR_INVALID_PARAM;
  e->recorded = true;
  e->when = std::chrono::steady_clock::now();
  return ACL_SUCCESS;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Event* e = find_event("aclrtResetEvent", event);
  if (!e) return ACL_ERROR_INVALID_PARAM;
  e->recorded = false;
  return ACL_SUCCESS;
}

// Everything recorded has already happened (synchronous streams): waiting returns at once.
aclError aclrtSynchronizeEvent(aclrtEvent event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return find_event("aclrtSynchronizeEvent", event) ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}

aclError aclrtStreamWaitEvent(aclrtStream, aclrtEvent event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return find_event("aclrtStreamWaitEvent", event) ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  if (!status) return rt_fail("aclrtQueryEventStatus: status is null");
  std::lock_guard<std::mutex> lock(g_mutex);
  Event* e = find_event("aclrtQueryEventStatus", event);
  if (!e) return ACL_ERROR_INVALID_PARAM;
  *status = e->recorded ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  if (!ms) return rt_fail("aclrtEventElapsedTime: ms is null");
  std::lock_guard<std::mutex> lock(g_mutex);
  Event* start = find_event("aclrtEventElapsedTime", startEvent);
  Event* end = start ? find_event("aclrtEventElapsedTime", endEvent) : nullptr;
  if (!start || !end) return ACL_ERROR_INVALID_PARAM;
  if (!start->recorded || !end->recorded)
    return rt_fail("aclrtEventElapsedTime: both events must have been recorded");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return ACL_SUCCESS;
}

// ---- half conversions, data type sizes, aclnn init ---------------------------------------------

aclFloat16 aclFloatToFloat16(float value) {
  return op::detail::half_bits_from_float_bits(op::detail::float_bits(value));
}

float aclFloat16ToFloat(aclFloat16 value) { return op::detail::float_from_half_bits(value); }

size_t aclDataTypeSize(aclDataType dataType) {
  return static_cast<size_t>(tilegrad::dtype_size(static_cast<tilegrad::DType>(dataType)));
}

aclnnStatus aclnnInit(const char*) { return ACLNN_SUCCESS; }
aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

}  // extern "C"
