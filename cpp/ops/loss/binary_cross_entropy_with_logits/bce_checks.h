// Argument checks shared by aclnnBinaryCrossEntropyWithLogits (the forward, its README) and
// aclnnBinaryCrossEntropyWithLogitsBackward (specification section 2): one validation in the order of
// specification section 0 (dtypes -> ranks -> shapes -> reduction -> overlaps; nulls are the C ABI's,
// before this), the C ABI's tensors as views, and the optional-tensor helpers both launches use.
#pragma once

#include "core/reduction.h"
#include "tilegrad/tensor_view.hpp"

struct aclTensor;

namespace tilegrad::core {
class ExecutorTensors;
}

namespace tilegrad::ops {

// The tensors of one call; grad_output is null in the forward; weight / pos_weight are null when
// absent; out is null for an output-spec query (its checks are skipped).
struct BceTensors {
  const TensorView* grad_output;
  const TensorView& self;
  const TensorView& target;
  const TensorView* weight;
  const TensorView* pos_weight;
  const TensorView* out;
};

// The shape out must have: always self's (the backward), or self's for none and one element
// (shape [] or [1]) for mean and sum (the forward's loss).
enum class BceOutShape { kSelf, kByReduction };

// Every check of one call, in the order above; op names the operator in the messages. The
// reduction is checked only when given (kByReduction needs it).
void bce_validate(const char* op, const BceTensors& a, const core::ReductionArg* reduction, BceOutShape out_shape);
// Its last checks, the ones that depend on addresses: out may alias an input exactly, never partly.
void bce_check_overlaps(const char* op, const BceTensors& a);

// The C ABI's tensors of one call; grad_output is the backward's (the forward has none).
struct BceAclTensors {
  const aclTensor* grad_output;
  const aclTensor* self;
  const aclTensor* target;
  const aclTensor* weight;
  const aclTensor* pos_weight;
  const aclTensor* out;
};

// Their views: a null required tensor is refused (161001) before any view is taken, in argument
// order; a null weight / pos_weight is absent (its pointer below is null).
struct BceAclViews {
  TensorView grad_output, self, target, weight, pos_weight, out;
  bool has_weight = false, has_pos_weight = false;
  const TensorView* weight_or_null() const { return has_weight ? &weight : nullptr; }
  const TensorView* pos_weight_or_null() const { return has_pos_weight ? &pos_weight : nullptr; }
};
BceAclViews bce_views_of(const char* op, const BceAclTensors& a, bool with_grad_output, core::ExecutorTensors& t);

// The native API's (and a bound launch's) optional tensor: null when absent (TensorView{}, see
// core::present), else &t.
const TensorView* bce_optional(const TensorView& t);

// The single element of a one-element fp32/fp16/bf16 view, widened to fp32.
float bce_read_one(const TensorView& t);

}  // namespace tilegrad::ops
