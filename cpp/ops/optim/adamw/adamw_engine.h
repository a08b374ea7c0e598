// The AdamW engine shared by aclnnFusedAdamw (lists) and aclnnApplyAdamWV2 (one tensor): checks both
// operators make alike, per-parameter scalars from the step, the optional global gradient-norm pass,
// and the one parallel region that updates every tensor. Each operator's api file validates its own
// arguments in the vendor's order, then builds an AdamWLaunch.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/executor.h"
#include "ops/optim/adamw/fused_adamw_kernel.h"
#include "ops/optim/adamw/fused_adamw_tiling.h"
#include "tilegrad/adamw.hpp"

namespace tilegrad::ops::adamw {

// One parameter: its operands (absent ones are the empty TensorView{}) and its step tensor.
struct Slot {
  TensorView t[kNumOperands];
  TensorView step;
};

// The names an operator gives its operands in messages and its C ABI ("paramsRef", "grads", ...) and
// whether they are lists ("paramsRef[3]") or single tensors ("varRef"); its optional scalars, if any.
struct Names {
  const char* op;
  const char* operand[kNumOperands];
  const char* step;
  bool lists;
  const char* grad_scale = nullptr;
  const char* found_inf = nullptr;
  std::string arg(int operand, size_t index) const;
  std::string step_arg(size_t index) const;
};

struct Extras {
  TensorView grad_scale, found_inf;  // fp32, one element each; absent = TensorView{}
  double max_grad_norm = std::numeric_limits<double>::quiet_NaN();  // NaN: no clipping
  double grad_norm = std::numeric_limits<double>::quiet_NaN();      // given: clip with it, no norm pass
};

// The global L2 norm of grads: fixed blocks of kNormBlockElems elements of each tensor, one partial
// sum of squares each (in double, 16 fixed lanes), added in block order: the same value for any
// thread count and ISA.
double grad_norm(const std::vector<TensorView>& grads, int threads, Isa isa);

// Shared checks (161002): step dtype float32/int64 with one element; the optional scalars; no two
// operands of any slot overlapping in memory and no output overlapping itself.
void require_step(const Names& n, size_t index, const TensorView& step);
void require_scalar_tensor(const char* op, const char* arg, const TensorView& t);
void require_no_overlap(const Names& n, const std::vector<Slot>& slots);

class AdamWLaunch final : public core::Launch {
 public:
  AdamWLaunch(const Names& names, std::vector<Slot> slots, const AdamWOptions& hyper, const Extras& extras);
  void bind(const core::Operands& tensors) override;
  void run(void* workspace) override;
  // The global gradient norm of the last run (before clipping); NaN unless max_grad_norm was given.
  double grad_norm() const { return grad_norm_; }
  bool skipped() const { return skipped_; }  // foundInf was 1.0: nothing was written
  const AdamWTiling& tiling() const { return tiling_; }

 private:
  Scalars scalars_for(size_t slot, float gmul) const;
  void update(int64_t tile, const std::vector<Scalars>& scalars) const;

  Names names_;
  std::vector<Slot> slots_;
  std::vector<bool> flat_;  // every operand of the slot contiguous
  Dtypes dtypes_template_;
  AdamWOptions hyper_;
  Extras extras_;
  AdamWTiling tiling_;
  int threads_ = 1;
  SpanFn span_ = nullptr;
  SumSqFn sumsq_ = nullptr;
  double grad_norm_ = std::numeric_limits<double>::quiet_NaN();
  bool skipped_ = false;
};

}  // namespace tilegrad::ops::adamw
