#include "ops/attention/flash_attention_score/fa_c_abi.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/acl_tensor.h"
#include "core/error.h"
#include "ops/attention/flash_attention_score/fa_problem.h"

namespace tilegrad::ops::fa {

const TensorView& CAbiArgs::operator[](const char* name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (std::strcmp(params_[i].name, name) == 0) return views_[i];
  throw std::logic_error(std::string("flash attention C ABI: no tensor parameter ") + name);
}

aclnnStatus create_c_abi_executor(const char* op, const std::vector<CAbiTensor>& params, const CAbiScalars& scalars,
                                  uint64_t* workspace_size, aclOpExecutor** executor, const MakeLaunch& make) {
  core::TensorParams names;
  for (const CAbiTensor& p : params) (p.output ? names.outputs : names.inputs).push_back(p.name);
  return core::create_executor(op, std::move(names), workspace_size, executor, [&](core::ExecutorTensors& t) {
    for (const CAbiTensor& p : params)
      if (p.need == Need::kRequired) core::require_not_null(op, p.name, p.tensor);
    const CAbiScalars& s = scalars;
    const FlashAttentionOptions options = c_abi_options(op, s.scale_value, s.keep_prob, s.pre_tokens, s.next_tokens,
                                                        s.head_num, s.input_layout, s.inner_precise, s.sparse_mode);
    std::vector<TensorView> views;
    views.reserve(params.size());
    for (const CAbiTensor& p : params) {
      const TensorView v = p.need == Need::kRequired ? t.view(p.name, p.tensor) : t.optional_view(p.name, p.tensor);
      views.push_back(p.need == Need::kReserved ? TensorView{} : v);
    }
    return make(CAbiArgs(params, std::move(views), options));
  });
}

}  // namespace tilegrad::ops::fa
