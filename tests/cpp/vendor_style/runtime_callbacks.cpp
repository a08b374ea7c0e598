/* Host callbacks on a stream, as the vendor's asynchronous-inference samples use them (C++11, vendor
 * headers only): a thread created for it loops on aclrtProcessReport, aclrtSubscribeReport binds it to the
 * stream, the main thread launches an operator and aclrtLaunchCallback behind it, and
 * aclrtSynchronizeStream returns once the callbacks have run (on the subscribed thread, in launch order).
 * Also: ACL_CALLBACK_BLOCK returns only after its callback ran; a stream without a subscribed thread
 * refuses a callback (ACL_ERROR_RT_STREAM_NO_CB_REG); a second thread on the same stream
 * (ACL_ERROR_RT_STREAM_SUBSCRIBE); aclrtProcessReport on a thread subscribed to nothing
 * (ACL_ERROR_RT_THREAD_SUBSCRIBE) and with nothing to run (ACL_ERROR_RT_REPORT_TIMEOUT);
 * aclrtSetOpWaitTimeout succeeds. Non-zero exit on any failure. */
#include <pthread.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "aclnn_silu_backward.h"
#include "sample_common.h"

namespace {

std::atomic<bool> g_exit(false);
std::atomic<int> g_processReportErrors(0);

struct CallbackRecord {
  std::vector<int> order;    // the userData values in the order the callbacks ran
  std::vector<bool> onWorker;  // whether each ran on the subscribed thread
  pthread_t worker;
  const float* dx;           // the operator's output (when set, the first callback reads element 5)
  float firstValueSeen;
};

CallbackRecord g_record;

// The vendor samples' callback thread: process reports until told to stop.
void* ProcessReportLoop(void*) {
  while (!g_exit.load()) {
    const aclError ret = aclrtProcessReport(100);
    // Before aclrtSubscribeReport and after aclrtUnSubscribeReport the thread is subscribed to nothing.
    if (ret != ACL_SUCCESS && ret != ACL_ERROR_RT_REPORT_TIMEOUT && ret != ACL_ERROR_RT_THREAD_SUBSCRIBE)
      g_processReportErrors++;
  }
  return nullptr;
}

void Callback(void* userData) {
  const int value = static_cast<int>(reinterpret_cast<intptr_t>(userData));
  if (g_record.order.empty() && g_record.dx) g_record.firstValueSeen = g_record.dx[5];
  g_record.order.push_back(value);
  g_record.onWorker.push_back(pthread_equal(pthread_self(), g_record.worker) != 0);
}

#define EXPECT_STATUS(expr, want)                                                                          \
  do {                                                                                                     \
    const int got_ = static_cast<int>(expr);                                                               \
    if (got_ != (want)) {                                                                                  \
      LOG_PRINT("FAIL %s: %d, expected %d (%s)\n", #expr, got_, static_cast<int>(want), RecentErrMsg()); \
      ++failures;                                                                                          \
    }                                                                                                      \
  } while (0)

int CallbackSample(aclrtStream stream) {
  int failures = 0;
  EXPECT_STATUS(aclrtSetOpWaitTimeout(30), ACL_SUCCESS);
  // Nothing subscribed yet.
  EXPECT_STATUS(aclrtLaunchCallback(Callback, nullptr, ACL_CALLBACK_NO_BLOCK, stream), ACL_ERROR_RT_STREAM_NO_CB_REG);
  EXPECT_STATUS(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);

  // The main thread subscribed to a stream of its own: nothing queued, so the report times out.
  aclrtStream own = nullptr;
  CHECK_ACL(aclrtCreateStream(&own));
  const uint64_t self = static_cast<uint64_t>(pthread_self());
  EXPECT_STATUS(aclrtSubscribeReport(self, own), ACL_SUCCESS);
  EXPECT_STATUS(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT);
  EXPECT_STATUS(aclrtProcessReport(0), ACL_ERROR_INVALID_PARAM);
  // Queued for this thread, run by its own aclrtProcessReport.
  g_record.worker = pthread_self();
  g_record.dx = nullptr;
  EXPECT_STATUS(aclrtLaunchCallback(Callback, reinterpret_cast<void*>(intptr_t(7)), ACL_CALLBACK_NO_BLOCK, own),
                ACL_SUCCESS);
  EXPECT_STATUS(aclrtProcessReport(1000), ACL_SUCCESS);
  CHECK_RET(g_record.order.size() == 1 && g_record.order[0] == 7 && g_record.onWorker[0],
            LOG_PRINT("FAIL: own callback did not run\n");
            return failures + 1);
  EXPECT_STATUS(aclrtUnSubscribeReport(self, own), ACL_SUCCESS);
  EXPECT_STATUS(aclrtUnSubscribeReport(self, own), ACL_ERROR_RT_THREAD_SUBSCRIBE);
  CHECK_ACL(aclrtDestroyStream(own));
  g_record.order.clear();
  g_record.onWorker.clear();

  // The vendor's flow: a worker thread processes the reports of `stream`.
  pthread_t worker;
  CHECK_RET(pthread_create(&worker, nullptr, ProcessReportLoop, nullptr) == 0, return failures + 1);
  g_record.worker = worker;
  EXPECT_STATUS(aclrtSubscribeReport(static_cast<uint64_t>(worker), stream), ACL_SUCCESS);
  EXPECT_STATUS(aclrtSubscribeReport(self, stream), ACL_ERROR_RT_STREAM_SUBSCRIBE);

  SampleTensors tensors;
  const std::vector<float> x = {1, 2, 3, 4, -1, -2};
  aclTensor* gradOutput = tensors.Create(std::vector<float>(6, 1.0f), {6}, ACL_FLOAT);
  aclTensor* self_ = tensors.Create(x, {6}, ACL_FLOAT);
  aclTensor* gradInput = tensors.Zeros<float>({6}, ACL_FLOAT);
  CHECK_RET(gradOutput && self_ && gradInput, return failures + 1);
  g_record.dx = static_cast<float*>(tensors.DeviceAddr(gradInput));
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK_ACL(aclnnSiluBackwardGetWorkspaceSize(gradOutput, self_, gradInput, &workspaceSize, &executor));
  CHECK_ACL(aclnnSiluBackward(nullptr, workspaceSize, executor, stream));
  for (int k = 1; k <= 3; ++k)
    EXPECT_STATUS(aclrtLaunchCallback(Callback, reinterpret_cast<void*>(intptr_t(k)), ACL_CALLBACK_NO_BLOCK, stream),
                  ACL_SUCCESS);
  EXPECT_STATUS(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  CHECK_RET(g_record.order.size() == 3, LOG_PRINT("FAIL: %zu callbacks ran before the stream synchronized\n",
                                                  g_record.order.size());
            ++failures);
  EXPECT_STATUS(aclrtLaunchCallback(Callback, reinterpret_cast<void*>(intptr_t(4)), ACL_CALLBACK_BLOCK, stream),
                ACL_SUCCESS);
  CHECK_RET(g_record.order.size() == 4, LOG_PRINT("FAIL: ACL_CALLBACK_BLOCK returned before its callback ran\n");
            ++failures);
  for (size_t k = 0; k < g_record.order.size(); ++k) {
    LOG_PRINT("callback %zu: userData %d, on the subscribed thread %d\n", k, g_record.order[k],
              g_record.onWorker[k] ? 1 : 0);
    if (g_record.order[k] != static_cast<int>(k) + 1 || !g_record.onWorker[k]) ++failures;
  }
  // The operator launched before the callbacks had finished when the first one ran.
  const double s = 1.0 / (1.0 + std::exp(2.0));  // x[5] = -2
  const double want = s * (1.0 - 2.0 * (1.0 - s));
  LOG_PRINT("gradInput[5] seen by the first callback: %.9g (want %.9g)\n", g_record.firstValueSeen, want);
  if (!(std::fabs(g_record.firstValueSeen - want) <= 1e-6)) ++failures;

  EXPECT_STATUS(aclrtUnSubscribeReport(static_cast<uint64_t>(worker), stream), ACL_SUCCESS);
  g_exit.store(true);
  pthread_join(worker, nullptr);
  if (g_processReportErrors.load() != 0) {
    LOG_PRINT("FAIL: aclrtProcessReport failed %d times on the worker\n", g_processReportErrors.load());
    ++failures;
  }
  return failures;
}

}  // namespace

int main() { return RunSample("runtime_callbacks", CallbackSample); }
