// The BCE-with-logits family's argument checks (bce_checks.h).
#include "ops/loss/binary_cross_entropy_with_logits/bce_checks.h"

#include <initializer_list>

#include "core/acl_tensor.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/executor.h"
#include "core/tensor.h"

namespace tilegrad::ops {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

struct Named {
  const char* name;
  const TensorView* t;  // null: absent
};

void require_broadcasts_to_self(const char* op, const char* arg, const TensorView& t, const TensorView& self) {
  core::check(core::broadcasts_to(t.shape, self.shape), op, ": ", arg, " shape ", shape_str(t.shape),
              " does not broadcast to self shape ", shape_str(self.shape));
}

// out's shape for the forward: self's for none; one element, shape [] or [1], for mean and sum (the
// vendor documents [1]; PyTorch returns a 0-d tensor). Unknown while the reduction is invalid
// (reported after the shapes).
void require_reduced_out_shape(const char* op, const TensorView& out, const TensorView& self,
                               const core::ReductionArg& reduction) {
  if (!reduction.valid()) return;
  if (reduction.value == Reduction::kNone) return core::require_shape(op, "out", out, self.shape, "self shape");
  const bool scalar = out.rank() == 0 || (out.rank() == 1 && out.shape[0] == 1);
  core::check(scalar, op, ": out shape must be [] or [1] for reduction ", core::reduction_name(reduction.value),
              ", got ", shape_str(out.shape));
}

}  // namespace

void bce_validate(const char* op, const BceTensors& a, const core::ReductionArg* reduction, BceOutShape out_shape) {
  const Named inputs[] = {{"gradOutput", a.grad_output},  {"self", &a.self}, {"target", &a.target},
                          {"weightOptional", a.weight}, {"posWeightOptional", a.pos_weight}};
  for (const Named& n : inputs)
    if (n.t) core::require_well_formed(op, n.name, *n.t);
  if (a.out) core::require_well_formed(op, "out", *a.out);

  for (const Named& n : inputs)
    if (n.t) core::require_dtype(op, n.name, *n.t, kFloatTypes);
  if (a.out) {
    core::require_dtype(op, "out", *a.out, kFloatTypes);
    core::check(a.out->dtype == a.target.dtype, op, ": out dtype ", dtype_name(a.out->dtype), " != target dtype ",
                dtype_name(a.target.dtype), " (out must have target's dtype)");
  }

  for (const Named& n : inputs)
    if (n.t) core::require_rank_at_most(op, n.name, *n.t);
  if (a.out) core::require_rank_at_most(op, "out", *a.out);

  core::require_shape(op, "target", a.target, a.self.shape, "self shape");
  if (a.out && out_shape == BceOutShape::kByReduction) require_reduced_out_shape(op, *a.out, a.self, *reduction);
  if (a.out && out_shape == BceOutShape::kSelf) core::require_shape(op, "out", *a.out, a.self.shape, "self shape");
  for (const Named& n : {inputs[0], inputs[3], inputs[4]})  // the operands that broadcast
    if (n.t) require_broadcasts_to_self(op, n.name, *n.t, a.self);

  if (reduction) core::require_valid(op, *reduction);

  if (a.out) core::require_no_self_overlap(op, "out", *a.out);
  bce_check_overlaps(op, a);
}

void bce_check_overlaps(const char* op, const BceTensors& a) {
  if (!a.out) return;
  const Named inputs[] = {{"gradOutput", a.grad_output},  {"self", &a.self}, {"target", &a.target},
                          {"weightOptional", a.weight}, {"posWeightOptional", a.pos_weight}};
  for (const Named& n : inputs)
    if (n.t) core::require_no_partial_overlap(op, "out", *a.out, n.name, *n.t, true);
}

BceAclViews bce_views_of(const char* op, const BceAclTensors& a, bool with_grad_output, core::ExecutorTensors& t) {
  if (with_grad_output) core::require_not_null(op, "gradOutput", a.grad_output);
  core::require_not_null(op, "self", a.self);
  core::require_not_null(op, "target", a.target);
  core::require_not_null(op, "out", a.out);
  BceAclViews v;
  if (with_grad_output) v.grad_output = t.view("gradOutput", a.grad_output);
  v.self = t.view("self", a.self);
  v.target = t.view("target", a.target);
  v.weight = t.optional_view("weightOptional", a.weight);
  v.pos_weight = t.optional_view("posWeightOptional", a.pos_weight);
  v.out = t.view("out", a.out);
  v.has_weight = a.weight != nullptr;
  v.has_pos_weight = a.pos_weight != nullptr;
  return v;
}

const TensorView* bce_optional(const TensorView& t) { return core::present(t) ? &t : nullptr; }

float bce_read_one(const TensorView& t) { return static_cast<float>(core::load_float_element(t.dtype, t.data)); }

}  // namespace tilegrad::ops
