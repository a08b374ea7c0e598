// The SwiGLU family's launch: one elementwise pass of a span kernel over operand views of one dtype,
// outputs first (forward {out, a, b}; backward {da, db, dy, a, b}, see swi_glu_kernel.h), tiled by
// the elementwise op tiling (core/elementwise_op_tiling.h) over one output's elements.
// aclnnSwiGlu / aclnnSwiGluGrad pass the halves of x (and of out, core/view_halves.h) and rebind them
// for the C ABI's repeatable executors; silu_mul / silu_mul_grad pass two separate tensors (a Llama
// MLP's gate and up projections), so all four run the same kernels the same way.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/elementwise.h"
#include "core/elementwise_op_tiling.h"
#include "core/elementwise_run.h"
#include "core/executor.h"
#include "core/tensor.h"
#include "ops/activation/swi_glu/swi_glu_kernel.h"

namespace tilegrad::ops {

class SwiGluSpansLaunch : public core::Launch {
 public:
  // operands: the outputs (num_outputs of them), then the inputs, all of one dtype; validated by the
  // caller. pick_kernel: swi_glu_kernel or swi_glu_grad_kernel.
  SwiGluSpansLaunch(const std::vector<TensorView>& operands, int num_outputs, SwiGluSpanFn (*pick_kernel)(Isa))
      : dtype_(operands[0].dtype), num_outputs_(num_outputs) {
    const std::vector<const TensorView*> ops = pointers(operands);
    layout_ = core::make_elementwise_layout(ops.data(), static_cast<int>(ops.size()));
    tiling_ = core::elementwise_op_tiling(operands[0].numel(), static_cast<int64_t>(ops.size()) * dtype_size(dtype_),
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

 protected:
  // Points the planned launch at the same operands (in the constructor's order) at new addresses.
  void rebind(const std::vector<TensorView>& operands) {
    core::bind_elementwise_layout(layout_, pointers(operands).data());
  }

 private:
  static std::vector<const TensorView*> pointers(const std::vector<TensorView>& operands) {
    std::vector<const TensorView*> p;
    for (const TensorView& v : operands) p.push_back(&v);
    return p;
  }

  DType dtype_;
  int num_outputs_;
  core::ElementwiseLayout layout_;
  core::ElementwiseOpTiling tiling_;
  SwiGluSpanFn kernel_ = nullptr;
};

}  // namespace tilegrad::ops
