/* A training loop's reuse of one aclnnFusedLinearCrossEntropyLossGrad executor (C++11, vendor headers
 * only): made repeatable after GetWorkspaceSize, launched, then given new addresses for grad
 * (aclSetInputTensorAddr), inputGradOut (aclSetOutputTensorAddr) and weightGradOut (aclSetTensorAddr,
 * which counts inputs then outputs: index 9) and launched again. The relaunch must write exactly what a
 * fresh single-use executor over the new buffers writes (bit for bit; the operator's own sample checks
 * those values against float64) and leave the first output buffers alone. Also the documented refusals:
 * an optional input that was NULL has no address (161002), an index past the tensors (161002), a NULL
 * executor or tensor for aclSetTensorAddr / aclSetDynamicTensorAddr (561103), and tensor-list refresh on
 * an operator without tensor-list parameters (161002). Non-zero exit on any failure. */
#include <cstring>
#include <vector>

#include "aclnn/opdev/bfloat16.h"
#include "aclnn_fused_linear_cross_entropy_loss_grad.h"
#include "sample_common.h"
#include "vocab_parallel_reference.h"

namespace {

const int64_t BT = 11, H = 8, V = 6, kVocabStart = 6;

struct Problem {
  SampleTensors tensors;
  aclTensor *grad, *input, *weight, *targetMask, *maskedTarget, *logitsMax, *sumExp, *inputGrad, *weightGrad;
};

// The operator's inputs (memory-saving mode: logitsMax and sumExpLogits, no softmax), zero outputs.
int MakeProblem(Problem* p, const std::vector<float>& grad) {
  const std::vector<op::bfloat16> input = StoredAs<op::bfloat16>(Wave(BT * H, 1.0, 0.1));
  const std::vector<op::bfloat16> weight = StoredAs<op::bfloat16>(Wave(V * H, 0.8, 2.3));
  std::vector<int64_t> target(BT);
  for (int64_t i = 0; i < BT; ++i) target[i] = (i * 7) % 16;
  const std::vector<double> logits = ShardLogits(AsDouble(input), AsDouble(weight), BT, H, V);
  const ShardStatistics shard = ShardReference(logits, target, BT, V, kVocabStart);
  p->grad = p->tensors.Create(grad, {BT}, ACL_FLOAT);
  p->input = p->tensors.Create(input, {BT, H}, ACL_BF16);
  p->weight = p->tensors.Create(weight, {V, H}, ACL_BF16);
  p->targetMask = p->tensors.Create(shard.targetMask, {(BT + 7) / 8}, ACL_UINT8);
  p->maskedTarget = p->tensors.Create(shard.maskedTarget, {BT}, ACL_INT64);
  p->logitsMax = p->tensors.Create(StoredAs<float>(shard.max), {BT}, ACL_FLOAT);
  p->sumExp = p->tensors.Create(StoredAs<float>(shard.sumExp), {BT}, ACL_FLOAT);
  p->inputGrad = p->tensors.Zeros<op::bfloat16>({BT, H}, ACL_BF16);
  p->weightGrad = p->tensors.Zeros<op::bfloat16>({V, H}, ACL_BF16);
  CHECK_RET(p->grad && p->input && p->weight && p->targetMask && p->maskedTarget && p->logitsMax && p->sumExp &&
                p->inputGrad && p->weightGrad,
            return 1);
  return 0;
}

aclnnStatus GetWorkspace(Problem* p, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(p->grad, p->input, p->weight, p->targetMask,
                                                              p->maskedTarget, 0.0f, p->logitsMax, p->sumExp, nullptr,
                                                              p->inputGrad, p->weightGrad, workspaceSize, executor);
}

// The bits of a bfloat16 output buffer `tensor` of p.
int ReadBits(const Problem& p, const aclTensor* tensor, std::vector<uint16_t>* bits) {
  std::vector<op::bfloat16> values;
  CHECK_RET(p.tensors.Read(tensor, &values) == 0, return 1);
  bits->resize(values.size());
  std::memcpy(bits->data(), values.data(), values.size() * sizeof(uint16_t));
  return 0;
}

int SameBits(const char* what, const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  bool same = got.size() == want.size() && !got.empty();
  for (size_t k = 0; same && k < got.size(); ++k) same = got[k] == want[k];
  LOG_PRINT("%s: %s\n", what, same ? "same bits" : "DIFFERENT");
  return same ? 0 : 1;
}

int ExpectStatus(const char* what, aclnnStatus got, aclnnStatus want, const char* text) {
  const char* message = RecentErrMsg();
  LOG_PRINT("%s: %d %s\n", what, got, message);
  CHECK_RET(got == want && std::strstr(message, text) != nullptr,
            LOG_PRINT("FAIL %s: expected %d with \"%s\"\n", what, want, text);
            return 1);
  return 0;
}

int RebindingSample(aclrtStream stream) {
  const std::vector<float> grad = StoredAs<float>(Wave(BT, 0.5, 1.0, 1.0));
  const std::vector<float> nextGrad = StoredAs<float>(Wave(BT, 2.0, -0.4, 0.25));
  Problem p;
  CHECK_RET(MakeProblem(&p, grad) == 0, return 1);
  aclTensor* nextGradTensor = p.tensors.Create(nextGrad, {BT}, ACL_FLOAT);
  aclTensor* nextInputGrad = p.tensors.Zeros<op::bfloat16>({BT, H}, ACL_BF16);
  aclTensor* nextWeightGrad = p.tensors.Zeros<op::bfloat16>({V, H}, ACL_BF16);
  CHECK_RET(nextGradTensor && nextInputGrad && nextWeightGrad, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK_ACL(GetWorkspace(&p, &workspaceSize, &executor));
  CHECK_ACL(aclSetAclOpExecutorRepeatable(executor));
  void* workspace = nullptr;
  if (workspaceSize > 0) CHECK_ACL(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK_ACL(aclnnFusedLinearCrossEntropyLossGrad(workspace, workspaceSize, executor, stream));
  CHECK_ACL(aclrtSynchronizeStream(stream));
  std::vector<uint16_t> firstInputGrad, firstWeightGrad;
  CHECK_RET(ReadBits(p, p.inputGrad, &firstInputGrad) == 0 && ReadBits(p, p.weightGrad, &firstWeightGrad) == 0,
            return 1);

  // New addresses, launch again.
  CHECK_ACL(aclSetInputTensorAddr(executor, 0, p.grad, p.tensors.DeviceAddr(nextGradTensor)));
  CHECK_ACL(aclSetOutputTensorAddr(executor, 0, p.inputGrad, p.tensors.DeviceAddr(nextInputGrad)));
  CHECK_ACL(aclSetTensorAddr(executor, 9, p.weightGrad, p.tensors.DeviceAddr(nextWeightGrad)));
  CHECK_ACL(aclnnFusedLinearCrossEntropyLossGrad(workspace, workspaceSize, executor, stream));
  CHECK_ACL(aclrtSynchronizeStream(stream));
  std::vector<uint16_t> gotInputGrad, gotWeightGrad, untouchedInputGrad;
  CHECK_RET(ReadBits(p, nextInputGrad, &gotInputGrad) == 0 && ReadBits(p, nextWeightGrad, &gotWeightGrad) == 0,
            return 1);

  // A fresh single-use executor over the new grad.
  Problem fresh;
  CHECK_RET(MakeProblem(&fresh, nextGrad) == 0, return 1);
  uint64_t freshWorkspaceSize = 0;
  aclOpExecutor* freshExecutor = nullptr;
  const aclnnStatus ret = GetWorkspace(&fresh, &freshWorkspaceSize, &freshExecutor);
  CHECK_RET(LaunchAndWait("aclnnFusedLinearCrossEntropyLossGrad", ret, freshWorkspaceSize, freshExecutor,
                          aclnnFusedLinearCrossEntropyLossGrad, stream) == 0,
            return 1);
  std::vector<uint16_t> wantInputGrad, wantWeightGrad;
  CHECK_RET(ReadBits(fresh, fresh.inputGrad, &wantInputGrad) == 0 &&
                ReadBits(fresh, fresh.weightGrad, &wantWeightGrad) == 0,
            return 1);
  CHECK_RET(ReadBits(p, p.inputGrad, &untouchedInputGrad) == 0, return 1);
  int failures = SameBits("inputGradOut after rebinding", gotInputGrad, wantInputGrad) +
                 SameBits("weightGradOut after rebinding", gotWeightGrad, wantWeightGrad) +
                 SameBits("first inputGradOut buffer, not written again", untouchedInputGrad, firstInputGrad);
  if (gotInputGrad == firstInputGrad) {
    LOG_PRINT("FAIL: the new grad gave the same inputGradOut as the first\n");
    ++failures;
  }

  // Refusals, as documented.
  failures += ExpectStatus("aclSetInputTensorAddr(7: softmaxOptional, NULL at GetWorkspaceSize)",
                           aclSetInputTensorAddr(executor, 7, p.grad, workspace), ACLNN_ERR_PARAM_INVALID,
                           "was null at GetWorkspaceSize");
  failures += ExpectStatus("aclSetTensorAddr(10)", aclSetTensorAddr(executor, 10, p.grad, workspace),
                           ACLNN_ERR_PARAM_INVALID, "index 10 is out of range");
  failures += ExpectStatus("aclSetTensorAddr(NULL executor)", aclSetTensorAddr(nullptr, 0, p.grad, workspace),
                           ACLNN_ERR_INNER_NULLPTR, "executor is null");
  failures += ExpectStatus("aclSetTensorAddr(NULL tensor)", aclSetTensorAddr(executor, 0, nullptr, workspace),
                           ACLNN_ERR_INNER_NULLPTR, "tensor is null");
  const aclTensor* listTensors[1] = {aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0,
                                                     nullptr)};
  aclTensorList* list = aclCreateTensorList(listTensors, 1);
  failures += ExpectStatus("aclSetDynamicTensorAddr", aclSetDynamicTensorAddr(executor, 0, 0, list, workspace),
                           ACLNN_ERR_PARAM_INVALID, "has no tensor-list parameter");
  failures += ExpectStatus("aclSetDynamicTensorAddr(NULL list)",
                           aclSetDynamicTensorAddr(executor, 0, 0, nullptr, workspace), ACLNN_ERR_INNER_NULLPTR,
                           "tensors is null");
  aclDestroyTensorList(list);
  CHECK_ACL(aclDestroyAclOpExecutor(executor));
  if (workspace) aclrtFree(workspace);
  return failures;
}

}  // namespace

int main() { return RunSample("executor_rebinding", RebindingSample); }
