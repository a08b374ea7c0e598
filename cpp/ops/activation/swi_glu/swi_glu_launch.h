// The SwiGLU family's launch: one elementwise pass of a span kernel over operand views of one dtype,
// outputs first (forward {out, a, b}; backward {da, db, dy, a, b}, see swi_glu_kernel.h).
// aclnnSwiGlu / aclnnSwiGluGrad pass the halves of x (and of dx); silu_mul / silu_mul_grad pass two
// separate tensors (a Llama MLP's gate and up projections), so both run the same kernels.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/elementwise.h"
#include "core/elementwise_run.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/swi_glu/swi_glu_kernel.h"
#include "ops/activation/swi_glu/swi_glu_tiling.h"

namespace tilegrad::ops {

class SwiGluSpansLaunch final : public core::Launch {
 public:
  // operands: the outputs (num_outputs of them), then the inputs; validated by the caller.
  SwiGluSpansLaunch(DType dtype, std::initializer_list<const TensorView*> operands, int num_outputs,
                    SwiGluSpanFn (*pick_kernel)(Isa))
      : dtype_(dtype), num_outputs_(num_outputs) {
    const std::vector<const TensorView*> ops(operands);
    layout_ = core::make_elementwise_layout(ops.data(), static_cast<int>(ops.size()));
    tiling_ = swi_glu_tiling(ops[0]->numel(), static_cast<int64_t>(ops.size()) * dtype_size(dtype_),
                             core::inner_is_contiguous(layout_), core::Platform::current());
    kernel_ = pick_kernel(tiling_.isa);
  }

  // The TILEGRAD_VERBOSE line: the operator, its tensors, the tiling, the split dim (-1 for none).
  void record(const char* op, std::initializer_list<core::TraceTensor> tensors, int64_t dim) {
    trace_.record(op, tensors, tiling_);
    trace_.field("dim", dim);
  }

  void run(void*) override {
    core::run_elementwise(
        layout_, tiling_.tiles, [&](char* const* ptrs, int64_t n, bool streaming) { kernel_(dtype_, ptrs, n, streaming); },
        num_outputs_);
  }

 private:
  DType dtype_;
  int num_outputs_;
  core::ElementwiseLayout layout_;
  SwiGluTiling tiling_;
  SwiGluSpanFn kernel_ = nullptr;
};

}  // namespace tilegrad::ops
