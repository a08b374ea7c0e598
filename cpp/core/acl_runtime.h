// What the files of the CPU aclrt* runtime share: acl_runtime.cpp (device, streams, memory),
// acl_context_event.cpp (contexts, events) and acl_stream_callbacks.cpp (host callbacks on streams).
#pragma once

#include <cstdint>
#include <string>

#include "acl/acl.h"

namespace tilegrad::core {

// Sets the calling thread's error message and returns code (the aclrt* calls return aclError).
aclError rt_fail(const std::string& message, aclError code = ACL_ERROR_INVALID_PARAM);

// ACL_SUCCESS for NULL (the default stream) or a live stream from aclrtCreateStream; else
// ACL_ERROR_RT_PARAM_INVALID with the message "<fn>: stream <p> is not a live stream".
aclError check_stream(const char* fn, aclrtStream stream);

// Waits until every callback queued on `stream` (all streams when all_streams) has run; timeout_ms -1
// waits for ever, > 0 at most that long (then ACL_ERROR_RT_WAIT_TIMEOUT). Callbacks queued for the
// calling thread itself run here, in place (waiting for them would never end).
aclError wait_stream_callbacks(const char* fn, aclrtStream stream, bool all_streams, int32_t timeout_ms);

// aclrtDestroyStream: the stream's subscription ends (callbacks already queued still run).
void forget_stream_callbacks(aclrtStream stream);

}  // namespace tilegrad::core
