// What the two C ABI entry points (aclnnFlashAttentionScore[Grad]GetWorkspaceSize) share: their
// aclTensor parameters described once as a table, gathered into views (null checks, 161001 naming the
// argument) and their scalar attributes into FlashAttentionOptions, then handed to the launch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "core/executor.h"
#include "tilegrad/flash_attention_score.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::fa {

// How an aclTensor parameter is read: required (null: 161001), optional (null: absent, an empty
// view), or reserved by the vendor (recorded for the executor, never read or written).
enum class Need { kRequired, kOptional, kReserved };

// One aclTensor parameter, in the vendor's order.
struct CAbiTensor {
  const char* name;
  const aclTensor* tensor;
  bool output;
  Need need;
};

// The scalar attributes both entry points take (the vendor's names and types).
struct CAbiScalars {
  double scale_value, keep_prob;
  int64_t pre_tokens, next_tokens, head_num;
  const char* input_layout;
  int64_t inner_precise, sparse_mode;
};

// The gathered arguments: a view per tensor parameter (empty for an absent optional or a reserved
// one) and the options.
class CAbiArgs {
 public:
  CAbiArgs(std::vector<CAbiTensor> params, std::vector<TensorView> views, FlashAttentionOptions options)
      : params_(std::move(params)), views_(std::move(views)), options(std::move(options)) {}
  // The view of the parameter called `name` (a name not in the table is a programming error: throws).
  const TensorView& operator[](const char* name) const;

 private:
  std::vector<CAbiTensor> params_;
  std::vector<TensorView> views_;

 public:
  FlashAttentionOptions options;
};

// Phase 1 of either entry point: checks every required tensor is given (in order), then the scalars
// (inputLayout null: 161001), views the tensors, and registers the launch make(args) builds.
using MakeLaunch = std::function<std::unique_ptr<core::Launch>(const CAbiArgs&)>;
aclnnStatus create_c_abi_executor(const char* op, const std::vector<CAbiTensor>& params, const CAbiScalars& scalars,
                                  uint64_t* workspace_size, aclOpExecutor** executor, const MakeLaunch& make);

}  // namespace tilegrad::ops::fa
