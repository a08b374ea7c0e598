// Pieces shared by aclnnCrossEntropyLoss and aclnnCrossEntropyLossGrad (specification section 3), kept
// in the family folder: attribute checks, loss shapes, class-weight access
// and the serial target scan that checks every target and reduces the mean divisors in a fixed
// order (row 0, 1, 2, ...), whatever the thread count.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/reduction.h"
#include "tilegrad/cross_entropy.hpp"
#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::ce {

// The attributes both operators take, as an entry point delivers them (the reduction not yet
// validated, see core::ReductionArg).
struct Attributes {
  core::ReductionArg reduction;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  double zscale = 0;  // lseSquareScaleForZloss
};
// From the native API's options.
Attributes attributes_of(const CrossEntropyOptions& o);
// From the C ABI's arguments; reductionOptional is parsed now (null: mean): the caller's string may be
// gone (or changed) before a repeatable executor's later launches.
Attributes attributes_of(const char* reduction, int64_t ignore_index, double label_smoothing, double zscale);

// 161002 naming op unless the reduction is valid and 0 <= labelSmoothing <= 1 (in this order).
Reduction require_attributes(const char* op, const Attributes& a);

// Loss-shaped tensors (loss, zloss, gradLoss, gradZloss; null entries skipped): (N) for none, 0-d or
// (1) for mean and sum. Nothing to check while the reduction is invalid: require_attributes reports it.
void require_loss_shapes(const char* op, const core::ReductionArg& r, int64_t n,
                         std::initializer_list<std::pair<const char*, const TensorView*>> tensors);

// What the serial pass over the targets produces. Throws fail_index (161002, IndexError) naming the
// lowest row whose target is outside [0, C) and is not ignoreIndex.
struct TargetScan {
  double weight_sum = 0;  // D  = sum_i w[t_i] * m_i   (row order)
  int64_t kept = 0;       // Dz = sum_i m_i
};
TargetScan scan_targets(const char* op, const TensorView& target, const TensorView& weight, int64_t classes,
                        int64_t ignore_index);

// sum_c w_c in index order (C without weight).
double weight_total(const TensorView& weight, int64_t classes);

// Weight as contiguous fp32: the tensor's own memory when its stride is 1, else copied to `scratch`
// (classes floats). Null without weight.
const float* contiguous_weight(const TensorView& weight, int64_t classes, float* scratch);
bool weight_needs_copy(const TensorView& weight);

}  // namespace tilegrad::ops::ce
