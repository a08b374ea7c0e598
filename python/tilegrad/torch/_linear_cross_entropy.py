"""The eager path of ``tilegrad.torch.linear_cross_entropy``: a lean ``torch.autograd.Function`` on
tilegrad's single-process fused linear cross entropy (``tilegrad.fused_linear_cross_entropy``).

What it computes, and when:

- Only the gradients ``ctx.needs_input_grad`` asks for (a frozen LM head, as with LoRA, never
  forms ``grad_weight``: one GEMM less, and for 16-bit weights no ``V x H`` fp32 accumulator).
- mean / sum with a gradient wanted: the forward computes the loss and the wanted gradients in one
  pass (three GEMMs, the fastest single forward + backward); the backward scales them by the
  upstream gradient. That holds a weight-sized buffer until the backward, so only **one** such
  call may be pending at a time: while one is, further forwards (a loss computed in chunks, several
  losses summed before one backward) compute the loss alone (one GEMM) and keep only their inputs'
  references; their backward runs the fused op again with the upstream gradient (three GEMMs).
  A pending call is released by its backward or when its graph is freed.
- ``reduction="none"``, or no gradient: the loss alone; the backward (if any) runs the fused op
  with each row's upstream gradient.
- A backward under grad mode (``create_graph=True``: second derivatives) recomputes the gradient
  through the differentiable composite (``F.linear`` + ``F.cross_entropy`` in float32), as
  ``_decoder.py`` does.
"""

import math
import weakref
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import functional as F

from .. import _fused_linear_cross_entropy as _flce
from ._eager import recompute_grads
from ._tensor import as_numpy, from_numpy, optional_numpy
from ._threads import sync_threads

_REDUCTION_NAMES = {0: "none", 1: "mean", 2: "sum"}

def multiply_adds(input: Tensor, weight: Tensor) -> int:
    """The projection's multiply-adds, rows x H x V: the measure of the linear_cross_entropy crossover
    (``tilegrad.torch._eager.CROSSOVER``; 0 for a 0-d weight, which no path projects with)."""
    return input.numel() * (weight.shape[0] if weight.dim() else 0)


class _PendingGradients:
    """Gradients a forward computed ahead of its backward (weight-sized): held here, referenced by
    the autograd node, and tracked weakly so that at most one such call is pending at a time."""

    def __init__(self, grads: Tuple[Optional[Tensor], ...]) -> None:
        self.grads: Optional[Tuple[Optional[Tensor], ...]] = grads

    def take(self) -> Tuple[Optional[Tensor], ...]:
        grads, self.grads = self.grads, None
        return grads


_pending = weakref.WeakSet()


def _nothing_pending() -> bool:
    return not any(p.grads is not None for p in _pending)


def pending_calls() -> int:
    """Calls whose precomputed gradients wait for their backward (0 or 1; tests and diagnostics)."""
    return sum(p.grads is not None for p in _pending)


def _fused(input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
           options: tuple, wanted: Tuple[bool, bool, bool], grad_output: Optional[Tensor] = None):
    """The fused op on torch tensors: (loss, grad_input, grad_weight, grad_bias), None for a
    gradient not wanted. ``grad_output``: float32 upstream gradient (scalar or per row)."""
    ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, weight_average = options
    sync_threads()
    results = _flce.fused_linear_cross_entropy(
        as_numpy(input), as_numpy(weight), as_numpy(target), ignore_index, _REDUCTION_NAMES[reduction],
        bias=optional_numpy(bias), class_weight=optional_numpy(class_weight), label_smoothing=label_smoothing,
        grad_output=None if grad_output is None else as_numpy(grad_output),
        filter_eps=filter_eps if filter_eps > 0.0 else None,
        filter_tolerance=filter_tolerance if filter_tolerance > 0.0 else None,
        filter_weight_bound="average" if weight_average else "column",
        grad_input=wanted[0], grad_weight=wanted[1], grad_bias=wanted[2] and bias is not None)
    loss, gi, gw = results[:3]
    gb = results[3] if bias is not None else None
    return tuple(None if r is None else from_numpy(r) for r in (loss, gi, gw, gb))


def composite(input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
              ignore_index: int, label_smoothing: float, reduction: str) -> Tensor:
    """``F.linear`` + ``F.cross_entropy`` with float32 logits (the fused op's numerics), differentiable
    to any order: the second-derivative path."""
    logits = F.linear(input.float(), weight.float(), None if bias is None else bias.float())
    return F.cross_entropy(logits, target, class_weight, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)


def composite_grads(grad_loss: Tensor, input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
                    class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float, reduction: str) -> list:
    """[d input, d weight, d bias] of the composite with ``create_graph=True`` (a backward run under
    grad mode; None for a tensor that needs no gradient): the saved tensors carry their history, so
    the result is differentiable again."""
    def loss(input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        return composite(input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction)

    return recompute_grads(loss, (input, weight, bias), (grad_loss.to(torch.float32),))  # the composite's loss dtype


class LinearCrossEntropyFunction(torch.autograd.Function):
    """``(rows (BT, H), weight (V, H), target (BT,), bias, class_weight fp32, ignore_index,
    label_smoothing, reduction code, filter_eps, filter_tolerance, filter_weight_average)`` -> float32
    loss (scalar, or (BT,) for "none")."""

    @staticmethod
    def forward(ctx, input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
                filter_eps, filter_tolerance, filter_weight_average):
        needs = ctx.needs_input_grad
        wanted = (needs[0], needs[1], bias is not None and needs[3])
        options = (ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, filter_weight_average)
        ctx.options, ctx.wanted, ctx.pending = options, wanted, None
        ctx.save_for_backward(input, weight, target, bias, class_weight)
        ahead = reduction != 0 and any(wanted) and _nothing_pending()
        loss, gi, gw, gb = _fused(input, weight, target, bias, class_weight, options,
                                  wanted if ahead else (False, False, False))
        if ahead:
            ctx.pending = _PendingGradients((gi, gw, gb))
            _pending.add(ctx.pending)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        if torch.is_grad_enabled():
            ignore_index, label_smoothing, reduction = ctx.options[:3]
            grads = composite_grads(grad_loss, *ctx.saved_tensors, ignore_index, label_smoothing,
                                    _REDUCTION_NAMES[reduction])
        else:
            grads = _backward(ctx, grad_loss)
        return grads[0], grads[1], None, grads[2], None, None, None, None, None, None, None


def _backward(ctx, grad_loss: Tensor):
    """The gradients computed in the forward, scaled (skipped when the upstream gradient is 1), else
    the fused op run again with the upstream gradient."""
    ahead = ctx.pending.take() if ctx.pending is not None else None
    if ahead is not None:
        scale = float(grad_loss)
        return [g if g is None or scale == 1.0 else (g.float() * scale).to(g.dtype) if g.dtype != torch.float32
                else g * scale for g in ahead]
    input, weight, target, bias, class_weight = ctx.saved_tensors
    grad_output = grad_loss.to(torch.float32).contiguous()
    _, gi, gw, gb = _fused(input, weight, target, bias, class_weight, ctx.options, ctx.wanted, grad_output)
    return [gi, gw, gb]


def apply(rows: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
          ignore_index: int, label_smoothing: float, reduction: int, filter_eps: float,
          filter_tolerance: float = 0.0, filter_weight_average: bool = False) -> Tensor:
    if not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (rows, weight, bias))):
        # no autograd node: the loss alone (its needs_input_grad would still say requires_grad)
        options = (ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, filter_weight_average)
        return _fused(rows, weight, target, bias, class_weight, options, (False, False, False))[0]
    return LinearCrossEntropyFunction.apply(rows, weight, target, bias, class_weight, ignore_index, label_smoothing,
                                            reduction, filter_eps, filter_tolerance, filter_weight_average)


def flatten_rows(input: Tensor) -> Tensor:
    """(..., H) -> (rows, H); explicit row count, so H = 0 works (reshape(-1, 0) is ambiguous)."""
    return input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
