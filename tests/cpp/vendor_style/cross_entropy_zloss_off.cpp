/* aclnnCrossEntropyLoss with z-loss off (lseSquareScaleForZloss = 0, returnZloss = false), called as the
 * vendor's cann-ops sample does: zlossOut and lseForZlossOut are 1-element tensors although N > 1. The
 * vendor's document makes those outputs None when z-loss is off, so they are ignored: only their dtype is
 * checked and nothing is written to them (C++11, vendor headers only). lossOut (mean) and logProbOut are
 * checked against float64 computed here. Also: a wrong dtype is still refused, and with z-loss on (or
 * returnZloss) the same 1-element lseForZlossOut is refused (161002). Non-zero exit on any failure. */
#include <cmath>
#include <cstring>
#include <vector>

#include "aclnn_cross_entropy_loss.h"
#include "sample_common.h"

namespace {

const int64_t N = 16, C = 7;
const float kSentinel = -7.25f;

struct Tensors {
  SampleTensors all;
  aclTensor *input, *target, *loss, *logProb, *zloss, *lse;
};

// Input (N, C) float32, targets 0..C-1 with one ignored row (-100), loss (1); zloss / lse of one element
// of zlossType (filled with kSentinel).
void Make(Tensors* t, const std::vector<float>& input, aclDataType zlossType) {
  std::vector<int64_t> target(N);
  for (int64_t i = 0; i < N; ++i) target[i] = (i * 5 + 2) % C;
  target[3] = -100;
  t->input = t->all.Create(input, {N, C}, ACL_FLOAT);
  t->target = t->all.Create(target, {N}, ACL_INT64);
  t->loss = t->all.Zeros<float>({1}, ACL_FLOAT);
  t->logProb = t->all.Zeros<float>({N, C}, ACL_FLOAT);
  t->zloss = zlossType == ACL_FLOAT ? t->all.Create(std::vector<float>{kSentinel}, {1}, ACL_FLOAT)
                                    : t->all.Create(std::vector<uint16_t>{0}, {1}, zlossType);
  t->lse = t->all.Create(std::vector<float>{kSentinel}, {1}, ACL_FLOAT);
}

aclnnStatus GetWorkspace(Tensors* t, double zscale, bool returnZloss, uint64_t* workspaceSize,
                         aclOpExecutor** executor) {
  char reduction[] = "mean";
  return aclnnCrossEntropyLossGetWorkspaceSize(t->input, t->target, nullptr, reduction, -100, 0.0, zscale, returnZloss,
                                               t->loss, t->logProb, t->zloss, t->lse, workspaceSize, executor);
}

int ZlossOffRuns(aclrtStream stream, const std::vector<float>& input) {
  Tensors t;
  Make(&t, input, ACL_FLOAT);
  CHECK_RET(t.input && t.target && t.loss && t.logProb && t.zloss && t.lse, return 1);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = GetWorkspace(&t, 0.0, false, &workspaceSize, &executor);
  CHECK_RET(LaunchAndWait("aclnnCrossEntropyLoss", ret, workspaceSize, executor, aclnnCrossEntropyLoss, stream) == 0,
            return 1);
  std::vector<float> loss, logProb, zloss, lse;
  CHECK_RET(t.all.Read(t.loss, &loss) == 0 && t.all.Read(t.logProb, &logProb) == 0 &&
                t.all.Read(t.zloss, &zloss) == 0 && t.all.Read(t.lse, &lse) == 0,
            return 1);
  // float64 reference: logProb = x - lse, mean over the rows not ignored of -logProb[t].
  std::vector<double> wantLogProb(N * C);
  double sum = 0.0;
  int64_t kept = 0;
  for (int64_t i = 0; i < N; ++i) {
    double m = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < C; ++j) m = std::fmax(m, input[i * C + j]);
    for (int64_t j = 0; j < C; ++j) s += std::exp(input[i * C + j] - m);
    for (int64_t j = 0; j < C; ++j) wantLogProb[i * C + j] = input[i * C + j] - (m + std::log(s));
    if (i == 3) continue;
    sum -= wantLogProb[i * C + (i * 5 + 2) % C];
    ++kept;
  }
  return CheckClose("lossOut", loss, std::vector<double>{sum / kept}, 2e-6, 1e-7) +
         CheckClose("logProbOut", logProb, wantLogProb, 2e-6, 1e-6) +
         CheckClose("zlossOut (untouched)", zloss, std::vector<double>{kSentinel}, 0, 0) +
         CheckClose("lseForZlossOut (untouched)", lse, std::vector<double>{kSentinel}, 0, 0);
}

// GetWorkspaceSize must return 161002 with `text` in the message.
int ExpectRefused(const std::vector<float>& input, aclDataType zlossType, double zscale, bool returnZloss,
                  const char* text) {
  Tensors t;
  Make(&t, input, zlossType);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus ret = GetWorkspace(&t, zscale, returnZloss, &workspaceSize, &executor);
  const char* message = RecentErrMsg();
  LOG_PRINT("z = %g, returnZloss = %d: status %d, %s\n", zscale, returnZloss ? 1 : 0, ret, message);
  CHECK_RET(ret == ACLNN_ERR_PARAM_INVALID && std::strstr(message, text) != nullptr,
            LOG_PRINT("FAIL: expected 161002 with \"%s\"\n", text);
            return 1);
  return 0;
}

int ZlossOffSample(aclrtStream stream) {
  const std::vector<float> input = StoredAs<float>(Wave(N * C, 3.0, 0.2));
  return ZlossOffRuns(stream, input) +
         ExpectRefused(input, ACL_FLOAT16, 0.0, false, "zlossOut dtype float16 != input dtype float32") +
         ExpectRefused(input, ACL_FLOAT, 1e-4, false, "lseForZlossOut shape [1]") +
         ExpectRefused(input, ACL_FLOAT, 0.0, true, "lseForZlossOut shape [1]");
}

}  // namespace

int main() { return RunSample("cross_entropy_zloss_off", ZlossOffSample); }
