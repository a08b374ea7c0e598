"""``tgt.linear``: ``F.linear`` whose float32 GEMMs run on oneDNN through tilegrad's core.

PyTorch's CPU ``F.linear`` / ``torch.mm`` in float32 runs on MKL; tilegrad's ``linear`` runs the same
products on oneDNN's matmul in blocks that depend on the shape only (``core::gemm``: the result is
the same bit for bit for every thread count), and its backward computes only the gradients autograd
asks for (a frozen weight never forms ``grad_weight``).

Paths (``_eager.route``):

- ``Path.TORCH``: float16 / bfloat16 (torch's own oneDNN bf16 GEMM is as fast), autocast regions
  (torch casts to bf16 there: its behaviour is kept), empty products, and whatever the kernels do not
  take (off the CPU, subclasses, mismatched dtypes or shapes: torch's own error).
- ``Path.COMPILE``: the ``torch.ops.tilegrad.linear`` op (fake kernel, registered autograd).
- ``Path.COMPOSITE``: under a ``torch.func`` transform and below ``CROSSOVER["linear"]``
  multiply-adds (LoRA's rank-16 adapters): torch's ``F.linear``, which is the same float32 formula.
- ``Path.KERNEL``: :class:`TilegradLinear`, a lean ``torch.autograd.Function`` on the core.

A backward under grad mode (``create_graph=True``) recomputes the gradients through ``F.linear``.
"""

import math
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.nn import functional as F

from .. import _core
from ._eager import Path, on_kernel_path, recompute_grads, route
from ._library import define, placeholder
from ._tensor import as_numpy, new_output, new_output_like, optional_numpy, sync_threads

# torch's own function, captured before anything can reroute torch.nn.functional.
_TORCH_LINEAR = F.linear


def multiply_adds(input: Tensor, weight: Tensor) -> int:
    """rows x in_features x out_features: the measure of the linear crossover."""
    return input.numel() * weight.shape[0]


def _gemm_ready(t: Tensor) -> Tensor:
    """``t`` when the GEMM reads it in place (row- or column-major 2-D), else a contiguous copy
    (e.g. the expanded gradient of a ``sum()``)."""
    return t if t.is_contiguous() or t.t().is_contiguous() else t.contiguous()


def _linear_impl(input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """The kernel on a 2-D input: a new (rows, out_features) tensor."""
    sync_threads()
    out = new_output((input.shape[0], weight.shape[0]), input.dtype)
    _core.linear(as_numpy(_gemm_ready(input)), as_numpy(_gemm_ready(weight)), optional_numpy(bias), as_numpy(out))
    return out


def _gradient_shapes(input: Tensor, weight: Tensor) -> Tuple[Sequence[int], ...]:
    return input.shape, weight.shape, (weight.shape[0],)


def _linear_backward_impl(grad: Tensor, input: Tensor, weight: Tensor, needs: Sequence[bool],
                          weight_layout: bool = False) -> List[Optional[Tensor]]:
    """[grad_input, grad_weight, grad_bias], None for a gradient not needed. ``weight_layout`` (the
    eager node): grad_weight laid out in memory as the weight is, so the gradient of a weight read
    transposed (GPT-2's Conv1D passes ``weight.t()``) reaches its parameter contiguous, with no copy
    (the op's fake kernel promises contiguous gradients, so the op path keeps them)."""
    sync_threads()
    grads = [new_output(shape, grad.dtype) if wanted else None
             for shape, wanted in zip(_gradient_shapes(input, weight), needs)]
    if weight_layout and needs[1] and not weight.is_contiguous():
        grads[1] = new_output_like(weight)
    _core.linear_backward(as_numpy(_gemm_ready(grad)), as_numpy(_gemm_ready(input)), as_numpy(_gemm_ready(weight)),
                          *(optional_numpy(g) for g in grads))
    return grads


def _composite(input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """The kernel's formula in torch ops (float32 accumulation, rounded once), differentiable."""
    return _TORCH_LINEAR(input, weight, bias)


def _needs(ctx, bias: Optional[Tensor]) -> Tuple[bool, bool, bool]:
    needs = ctx.needs_input_grad
    return bool(needs[0]), bool(needs[1]), bias is not None and bool(needs[2])


def _linear_backward(ctx, grad: Tensor, grad_kernel):
    input, weight, bias = ctx.saved_tensors
    if torch.is_grad_enabled():
        return tuple(recompute_grads(_composite, (input, weight, bias), (grad,)))
    return tuple(grad_kernel(grad, input, weight, _needs(ctx, bias)))


# ---- torch.library ops (torch.compile / torch.export) -------------------------------------------


def _linear_fake(input, weight, bias):
    return input.new_empty((input.shape[0], weight.shape[0]))


def _linear_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _op_grads(grad: Tensor, input: Tensor, weight: Tensor, needs: Sequence[bool]) -> List[Optional[Tensor]]:
    """The op's gradients, its 0-element placeholders (ops cannot return None) back to None."""
    grads = torch.ops.tilegrad.linear_backward(grad, input, weight, list(needs))
    return [g if wanted else None for g, wanted in zip(grads, needs)]


def _linear_grad_formula(ctx, grad: Tensor):
    return _linear_backward(ctx, grad, _op_grads)


define("linear(Tensor input, Tensor weight, Tensor? bias) -> Tensor", _linear_impl, _linear_fake,
        (_linear_grad_formula, _linear_setup))


def _linear_backward_op_impl(grad: Tensor, input: Tensor, weight: Tensor, needs: List[bool]):
    grads = _linear_backward_impl(grad, input, weight, needs)
    return tuple(placeholder(grad) if g is None else g for g in grads)


def _linear_backward_fake(grad, input, weight, needs):
    return tuple(grad.new_empty(shape) if wanted else placeholder(grad)
                 for shape, wanted in zip(_gradient_shapes(input, weight), needs))


define("linear_backward(Tensor grad, Tensor input, Tensor weight, bool[] needs) -> (Tensor, Tensor, Tensor)",
        _linear_backward_op_impl, _linear_backward_fake)


# ---- eager ---------------------------------------------------------------------------------------


class TilegradLinear(torch.autograd.Function):
    """``(input (rows, in), weight (out, in), bias (out,) or None)`` -> ``(rows, out)`` on the core."""

    @staticmethod
    def forward(ctx, input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        ctx.save_for_backward(input, weight, bias)
        return _linear_impl(input, weight, bias)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _linear_backward(ctx, grad, _eager_backward_kernel)


def _eager_backward_kernel(grad: Tensor, input: Tensor, weight: Tensor, needs: Sequence[bool]) -> List[Optional[Tensor]]:
    return _linear_backward_impl(grad, input, weight, needs, weight_layout=True)


def _kernel_takes(input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    """float32 operands of F.linear's shapes that the core takes, outside autocast, with a product to
    compute (16-bit runs torch's F.linear: its bf16 GEMM is oneDNN's already)."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor) and (bias is None or isinstance(bias, Tensor))):
        return False
    if input.dtype != torch.float32 or weight.dtype != torch.float32 or (bias is not None and bias.dtype != torch.float32):
        return False
    if input.dim() < 1 or weight.dim() != 2 or input.shape[-1] != weight.shape[1]:
        return False
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        return False
    if torch.is_autocast_enabled("cpu"):
        return False
    return on_kernel_path(input, weight, bias) and multiply_adds(input, weight) > 0


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``torch.nn.functional.linear``: ``input @ weight.T + bias``, with any leading dims.

    float32 tensors run on tilegrad's core: oneDNN's matmul, float32 accumulation, results the same
    bit for bit for every thread count (``torch.get_num_threads()`` threads), and a backward that
    computes only the gradients autograd needs. float16 / bfloat16, autocast regions and tensors the
    core does not take run torch's ``F.linear`` (its values and errors); small products below
    ``CROSSOVER["linear"]`` multiply-adds run it too. ``torch.compile(fullgraph=True)`` traces
    through ``torch.ops.tilegrad.linear``.
    """
    supported = _kernel_takes(input, weight, bias)
    path = route(supported, input.dtype, linear=multiply_adds(input, weight) if supported else 0)
    if path is Path.TORCH or path is Path.COMPOSITE:
        return _composite(input, weight, bias)
    rows = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    if path is Path.COMPILE:
        out = torch.ops.tilegrad.linear(rows, weight, bias)
    else:
        out = TilegradLinear.apply(rows, weight, bias)
    return out.view(*input.shape[:-1], weight.shape[0])
