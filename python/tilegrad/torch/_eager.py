"""The routing every tilegrad.torch function shares: one crossover registry and one router.

Each function asks :func:`route` which of four paths a call takes, always decided in this order:

1. ``Path.TORCH``: what the kernels cannot take (tensors off the CPU, not strided, of other dtypes,
   tensor subclasses such as DTensor, arguments the function lists) goes to torch's own function,
   with torch's own rules and values.
2. ``Path.COMPILE``: under ``torch.compile`` / ``torch.export`` the ``torch.ops.tilegrad`` op (fake
   kernel, registered autograd), at every size: shapes may be symbolic there.
3. ``Path.COMPOSITE``: under a ``torch.func`` transform (its wrapped tensors cannot be handed to the
   core), and for eager calls below the op's measured crossover (:data:`CROSSOVER`, where torch's
   kernels plus their lighter autograd node are faster), torch ops computing what the kernel
   computes: 16-bit tensors widened to float32 and each result rounded once, so the call accepts
   the same arguments and is as precise as on the kernel, whatever its size.
4. ``Path.KERNEL``: a lean ``torch.autograd.Function`` whose forward and backward reach the C++ core
   directly (a ``torch.library`` op costs tens of microseconds of dispatch per call).

Second derivatives: a backward that runs with grad mode on (``create_graph=True``) recomputes the
gradient through the differentiable composite (:func:`recompute_grads`) instead of the kernels.
"""

import enum
from typing import Callable, List, Optional, Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from ._tensor import unsupported_reason

# torch's own functions, captured before tilegrad.torch.enable() can reroute torch.nn.functional:
# every fallback and composite calls these, never the (possibly rerouted) module attribute.
TORCH_FUNCTIONS = {
    name: getattr(F, name)
    for name in ("silu", "cross_entropy", "embedding", "binary_cross_entropy_with_logits", "linear_cross_entropy",
                 "rms_norm", "layer_norm")
    if hasattr(F, name)
}

# Tensor types handed to the core: a subclass (DTensor, a tensor wrapper) keeps its own dispatch.
_PLAIN_TENSOR_TYPES = (Tensor, torch.nn.Parameter)


def on_kernel_path(*tensors: Optional[Tensor]) -> bool:
    """True when every given tensor can go to a tilegrad kernel: a dense CPU tensor of a kernel dtype,
    not a subclass (while compiling or exporting, tracing's own fake / functional tensors pass)."""
    if not all(t is None or unsupported_reason(t) is None for t in tensors):
        return False
    return all(t is None or type(t) in _PLAIN_TENSOR_TYPES for t in tensors) or torch.compiler.is_compiling()


def elementwise_on_kernel_path(*tensors: Tensor) -> bool:
    """Tensors of one shape and dtype, with elements, that the kernels take (an elementwise op's
    operands: broadcasting and mixed dtypes go to torch)."""
    first = tensors[0]
    return (all(t.shape == first.shape and t.dtype == first.dtype for t in tensors[1:]) and on_kernel_path(*tensors)
            and first.numel() > 0)


def check_halves(op: str, input: Tensor, dim: int) -> None:
    """A GLU's split of ``input`` into two halves along ``dim``: the dim exists and is even."""
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"tilegrad.torch.{op}: dim must be in [{-input.dim()}, {input.dim() - 1}], got {dim}")
    if input.shape[dim] % 2:
        raise ValueError(f"tilegrad.torch.{op}: input.shape[{dim}] must be even, got {input.shape[dim]}")


def transform_active() -> bool:
    """A torch.func transform (grad, vmap, jacrev, ...) is running: its wrapped tensors cannot go to
    the kernels, so the composite runs."""
    return torch._C._functorch.peek_interpreter_stack() is not None


class Path(enum.Enum):
    """Where a call runs (see the module docstring for the order they are decided in)."""
    TORCH = "torch's own function"
    COMPILE = "torch.ops.tilegrad op"
    COMPOSITE = "torch ops with the kernel's numerics"
    KERNEL = "eager autograd node on the C++ core"


_F32, _F16, _BF16 = torch.float32, torch.float16, torch.bfloat16

# Eager calls below these sizes take the composite (Path.COMPOSITE): torch's kernels plus their
# lighter autograd node beat tilegrad's fixed cost (its autograd node, the hand-off to the core)
# there. One entry per measure, {dtype: size}; a dtype that is missing runs the kernel at every size.
# Each size is the power of two at or just above the measured crossing of the composite and the
# kernel's node (forward + backward, 1 thread, process CPU time, idle machine); a kernel that wins at
# every size measured gets the smallest size measured (1K elements: smaller calls were not measured).
# 16-bit sizes are measured in bf16 and fp16 takes them (the same widened float32 arithmetic).
# docs/pytorch/fallbacks.md shows this table (docs/_hooks/includes.py renders it from here).
CROSSOVER = {
    # python benchmarks/bench_torch.py --crossover: elements of the input (silu, BCE), of the output
    # (embedding) or of the logits (cross entropy); "cross_entropy_classes": logits with fewer classes
    # (torch's kernel vectorises across rows, tilegrad's along a row; its second table, N = 65536).
    "silu": {_F32: 1 << 20, _F16: 1 << 20, _BF16: 1 << 20},
    "cross_entropy": {_F32: 1 << 12, _F16: 1 << 12, _BF16: 1 << 12},
    "cross_entropy_classes": {_F32: 64, _F16: 64, _BF16: 64},
    # 16-bit weights: the kernel at every size. Their composite would widen the whole (V, D) table to
    # float32 to keep the kernel's float32 row sums (torch sums 16-bit gradients in 16 bits).
    "embedding": {_F32: 1 << 14},
    "binary_cross_entropy_with_logits": {_F32: 1 << 10, _F16: 1 << 10, _BF16: 1 << 10},
    # python benchmarks/bench_decoder.py --crossover: input elements (fp32 rms_norm and rope: the kernel
    # at every size).
    "rms_norm": {_F16: 1 << 10, _BF16: 1 << 10},
    # input elements (x1's): the fused node wins at every size measured (fp32 too).
    "add_rms_norm": {_F16: 1 << 10, _BF16: 1 << 10},
    # python benchmarks/bench_layer_norm.py --crossover: input elements. torch's float32 LayerNorm is
    # a fast kernel of its own, so the composite (torch's F.layer_norm) wins up to about 1M elements.
    "layer_norm": {_F32: 1 << 20, _F16: 1 << 17, _BF16: 1 << 17},
    "silu_mul": {_F32: 1 << 16, _F16: 1 << 15, _BF16: 1 << 15},
    "swiglu": {_F32: 1 << 14, _F16: 1 << 12, _BF16: 1 << 12},
    # GELU and gelu_mul (geglu is gelu_mul on the halves)
    "gelu": {_F32: 1 << 13, _F16: 1 << 13, _BF16: 1 << 13},
    "gelu_mul": {_F32: 1 << 13, _F16: 1 << 13, _BF16: 1 << 13},
    "rope": {_F16: 1 << 10, _BF16: 1 << 10},
    # python benchmarks/bench_torch_linear_cross_entropy.py --only small: multiply-adds rows x H x V.
    # 16-bit: the kernel at every size (the composite would widen the (V, H) weight to float32).
    "linear_cross_entropy": {_F32: 1 << 25},
    # python benchmarks/bench_linear.py: multiply-adds rows x in_features x out_features of float32
    # layers (16-bit layers keep torch's F.linear: its own oneDNN bf16 GEMM is as fast).
    "linear": {_F32: 1 << 23},
}


def below_crossover(op: str, size: int, dtype: torch.dtype) -> bool:
    """``size`` is below the measured size at which tilegrad's call overtakes torch's
    (``CROSSOVER[op][dtype]``; missing: tilegrad at every size)."""
    return size < CROSSOVER[op].get(dtype, 0)


def route(supported: bool, dtype: torch.dtype, *, wants_grad: bool = True, **sizes: int) -> Path:
    """The path of one call (the module docstring gives the order).

    ``supported``: the kernels take these arguments. ``dtype``: the tensor the crossover is measured
    on. ``sizes``: ``CROSSOVER`` entry -> this call's size in that entry's measure (below any of them
    is below the crossover). ``wants_grad=False``: an op whose kernel runs only in the backward (silu,
    embedding) and nothing to differentiate: the composite gives the same forward without a node.
    """
    if not supported:
        return Path.TORCH
    if torch.compiler.is_compiling():
        return Path.COMPILE
    if not wants_grad or transform_active() or any(below_crossover(op, n, dtype) for op, n in sizes.items()):
        return Path.COMPOSITE
    return Path.KERNEL


def needs_autograd(*tensors: Optional[Tensor]) -> bool:
    """Autograd will differentiate a result of these tensors (grad mode on, one requires grad)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def widened(*tensors: Optional[Tensor]) -> tuple:
    """float32 views of the tensors for the composites (16-bit ones widened; float32 ones as they are,
    no copy; None stays None): their gradients come back rounded once to each tensor's dtype."""
    return tuple(None if t is None else t.float() for t in tensors)


def rounded_once(fn: Callable[..., Tensor], dtype: torch.dtype, *tensors: Optional[Tensor]) -> Tensor:
    """``fn`` on the float32-widened ``tensors``, its result rounded once to ``dtype``: a kernel's
    numerics (float32 arithmetic, each output rounded once) in differentiable torch ops."""
    return fn(*widened(*tensors)).to(dtype)


# Block of fixed_order_sum: each block is summed whole by one thread (torch parallelises a reduction
# with several outputs over the outputs), and 4096 block sums stay under torch's parallel grain (32768).
_SUM_BLOCK = 4096


def fixed_order_sum(t: Tensor) -> Tensor:
    """The sum of every element of ``t``, differentiable, rounded the same for any thread count:
    torch's full reduction splits the elements among the threads, so its rounding depends on their
    number. Sums blocks of ``_SUM_BLOCK`` elements, then the block sums, until one block is left."""
    flat = t.reshape(-1)
    while flat.numel() > _SUM_BLOCK:
        padding = -flat.numel() % _SUM_BLOCK
        if padding:
            flat = torch.cat((flat, flat.new_zeros(padding)))
        flat = flat.view(-1, _SUM_BLOCK).sum(dim=1)
    return flat.sum()


def reduced(values: Tensor, reduction: str, mean_divisor) -> Tensor:
    """``values`` as they are ("none"), summed, or summed and divided by ``mean_divisor`` ("mean"); the
    sum in a fixed order (the same for any thread count)."""
    if reduction == "none":
        return values
    total = fixed_order_sum(values)
    return total / mean_divisor if reduction == "mean" else total


def recompute_grads(fn, inputs: Sequence[Optional[Tensor]], grads: Sequence[Optional[Tensor]]) -> List:
    """Gradients of the differentiable composite ``fn(*inputs)`` w.r.t. the inputs that require grad,
    with ``create_graph=True`` (a backward run under grad mode: higher-order gradients); None elsewhere."""
    with torch.enable_grad():
        outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
    wanted = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    result: List = [None] * len(inputs)
    if pairs and wanted:
        found = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in wanted], [g for _, g in pairs],
                                    create_graph=True, allow_unused=True)
        for i, g in zip(wanted, found):
            result[i] = g
    return result


# ---------------------------------------------------------------------------------------------------
# Arguments the loss functions share (torch's conventions)

_INDEX_DTYPES = (torch.int64, torch.int32)
_REDUCTIONS = ("none", "mean", "sum")


def requires_grad(t: Optional[Tensor]) -> bool:
    """An optional operand that requires grad (class weights, pos_weight): torch decides those cases."""
    return t is not None and t.requires_grad


def is_index_tensor(t: Tensor) -> bool:
    """A class-index / row-index tensor the kernels take: dense CPU int64 or int32."""
    return t.device.type == "cpu" and t.layout == torch.strided and t.dtype in _INDEX_DTYPES


def legacy_reduction(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    """torch's deprecated size_average/reduce pair mapped to a reduction string, as torch does."""
    if size_average is None and reduce is None:
        return reduction
    from torch.nn import _reduction
    return _reduction.legacy_get_string(size_average, reduce, emit_warning=True)


def check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def autocast_dtype(*tensors: Tensor) -> Optional[torch.dtype]:
    """The CPU autocast dtype when autocast is on and applies to these tensors, else None."""
    if torch.is_autocast_enabled("cpu") and all(t.device.type == "cpu" for t in tensors):
        return torch.get_autocast_dtype("cpu")
    return None
