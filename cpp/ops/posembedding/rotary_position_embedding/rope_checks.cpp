// Argument rules shared by aclnnRotaryPositionEmbedding and aclnnRotaryPositionEmbeddingGrad.
#include "ops/posembedding/rotary_position_embedding/rope_checks.h"

#include "core/error.h"
#include "core/tensor.h"

namespace tilegrad::ops {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

template <class... Parts>
[[noreturn]] void fail_shape(const Parts&... parts) {
  core::fail(Status::kInnerTilingError, parts...);
}

}  // namespace

std::string RopeShape::cos_pattern() const {
  static const char kLetters[3] = {'B', 'S', 'N'};
  std::string s;
  for (int k = 0; k < 3; ++k) s += broadcast(k) ? '1' : kLetters[k];
  return s + 'D';
}

void require_rope_dtypes(const char* op, const char* x_arg, const TensorView& x, const TensorView& cos,
                         const TensorView& sin) {
  core::require_dtype(op, x_arg, x, kFloatTypes);
  core::require_same_dtype(op, "cos", cos, x_arg, x);
  core::require_same_dtype(op, "sin", sin, x_arg, x);
}

void require_rope_output_dtype(const char* op, const char* arg, const TensorView& out, const char* x_arg,
                               const TensorView& x) {
  core::require_same_dtype(op, arg, out, x_arg, x);
}

void require_rope_rank(const char* op, const char* arg, const TensorView& t) {
  if (t.rank() != 4) fail_shape(op, ": ", arg, " must be 4-D, got shape ", shape_str(t.shape));
}

RopeMode rope_mode(const char* op, int64_t mode) {
  if (mode < 0 || mode > 3)
    fail_shape(op, ": mode must be 0 (half), 1 (interleave), 2 (quarter) or 3 (interleave-half), got ", mode);
  return static_cast<RopeMode>(mode);
}

RopeShape rope_shape(const char* op, const char* x_arg, const TensorView& x, const TensorView& cos,
                     const TensorView& sin, RopeMode mode) {
  if (sin.shape != cos.shape)
    fail_shape(op, ": sin shape ", shape_str(sin.shape), " != cos shape ", shape_str(cos.shape));
  RopeShape s;
  s.mode = mode;
  s.d = x.shape[3];
  if (cos.shape[3] != s.d)
    fail_shape(op, ": cos last dim must equal ", x_arg, "'s ", s.d, ", got ", cos.shape[3], " (cos shape ",
               shape_str(cos.shape), ")");
  const int64_t multiple = mode == RopeMode::kQuarter ? 4 : 2;
  if (s.d % multiple != 0)
    fail_shape(op, ": ", x_arg, " last dim must be a multiple of ", multiple, " in mode ", static_cast<int>(mode),
               " (", rope_mode_name(mode), "), got ", s.d);
  if (s.d > kRopeMaxD) fail_shape(op, ": ", x_arg, " last dim must be at most ", kRopeMaxD, ", got ", s.d);
  for (int k = 0; k < 3; ++k) {
    s.dims[k] = x.shape[k];
    s.cos_dims[k] = cos.shape[k];
    if (cos.shape[k] != 1 && cos.shape[k] != x.shape[k])
      fail_shape(op, ": cos dim ", k, " must be 1 or ", x_arg, "'s ", x.shape[k], " (cos shape ",
                 shape_str(cos.shape), ", ", x_arg, " shape ", shape_str(x.shape), "), got ", cos.shape[k]);
  }
  return s;
}

void require_rope_output_shape(const char* op, const char* arg, const TensorView& out, const char* ref_arg,
                               const TensorView& ref) {
  if (out.shape != ref.shape)
    fail_shape(op, ": ", arg, " shape ", shape_str(out.shape), " != ", ref_arg, " shape ", shape_str(ref.shape));
}

bool rope_rows_aligned(const TensorView& t) {
  const int64_t es = dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % 64 != 0 || !rope_inner_contiguous(t)) return false;
  for (int k = 0; k < 3; ++k)
    if (t.shape[k] > 1 && (t.strides[k] * es) % 64 != 0) return false;
  return true;
}

RopeOperand rope_operand(const TensorView& t) {
  RopeOperand o;
  o.base = static_cast<char*>(t.data);
  const int64_t es = dtype_size(t.dtype);
  for (int k = 0; k < 3; ++k) o.stride[k] = t.shape[k] == 1 ? 0 : t.strides[k] * es;
  return o;
}

}  // namespace tilegrad::ops
