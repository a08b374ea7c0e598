// Pieces shared by aclnnCrossEntropyLoss and aclnnCrossEntropyLossGrad (SEMANTICS section 3):
// attribute parsing, strided scalar access, and the serial target scan that checks every target
// and reduces the mean divisors in a fixed order (row 0, 1, 2, ...), whatever the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops::ce {

enum class Reduction : int { kNone = 0, kMean = 1, kSum = 2 };

// "none" | "mean" | "sum"; null means "mean" (the vendor's reductionOptional). ok = false otherwise.
bool parse_reduction(const char* s, Reduction* out);
// 161002 naming op unless the reduction parses and 0 <= labelSmoothing <= 1.
Reduction require_attributes(const char* op, const char* reduction, double label_smoothing);
// The native API's reduction string: an embedded NUL ("mean\0x") would be read as "mean" through
// c_str(), so it is an error naming the whole string.
void require_plain_reduction(const char* op, const std::string& reduction);
const char* reduction_name(Reduction r);

// An optional tensor was given (C ABI: non-null; C++/Python: not an empty TensorView).
inline bool present(const TensorView& t) { return t.dtype != DType::kUndefined || t.data != nullptr; }

// A loss-shaped tensor (loss, zloss, gradLoss, gradZloss): (N) for none, 0-d or (1) for mean and sum.
void require_loss_shape(const char* op, const char* arg, const TensorView& t, Reduction r, int64_t n);

// `arg` has the dtype of the reference tensor `ref_arg` (161002 naming both).
void require_same_dtype(const char* op, const char* arg, const TensorView& t, const char* ref_arg,
                        const TensorView& ref);

// One element of a strided float tensor (fp32/fp16/bf16) / integer target (int32/int64).
float load_float(const TensorView& t, int64_t index);
void store_float(const TensorView& t, int64_t index, float value);
int64_t load_target(const TensorView& t, int64_t index);

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
