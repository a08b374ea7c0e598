"""Fused linear cross entropy in PyTorch: ``tilegrad.torch.linear_cross_entropy`` on tilegrad's
single-process fused linear cross entropy (``tilegrad.fused_linear_cross_entropy``), and the
vocabulary-parallel aclnn ops as ``torch.ops.tilegrad`` ops.

- ``tilegrad::linear_cross_entropy`` (loss and gradients in one call; mean / sum with autograd) and
  ``tilegrad::linear_cross_entropy_rows`` (per-row losses; the backward recomputes): the
  ``torch.compile`` path.
- :class:`LinearCrossEntropyFunction`: the eager node, calling the core directly.
- Below the crossover (float32), under ``torch.func`` and for what the kernels do not take:
  torch's ``F.linear_cross_entropy``.

What the eager node computes, and when:

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
  through the differentiable composite (``F.linear`` + ``F.cross_entropy`` in float32), as the
  other families do.
"""

import math
import weakref
from typing import Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from .. import _core
from .. import _fused_linear_cross_entropy as _flce
from .._fused_linear_cross_entropy import filter_settings, filter_weight_average
from ._eager import (TORCH_FUNCTIONS, Path, autocast_dtype, check_reduction, is_index_tensor, on_kernel_path,
                     recompute_grads, requires_grad, route)
from ._library import REDUCTION_CODES, REDUCTION_NAMES, define, placeholder
from ._tensor import as_numpy, from_numpy, numpy_dtype, optional_numpy, sync_threads

# The reductions the linear_cross_entropy op takes (with autograd; "none" goes to linear_cross_entropy_rows).
_MEAN_OR_SUM = {1: "mean", 2: "sum"}


# ---------------------------------------------------------------------------------------------------
# torch.library ops: the vocabulary-parallel aclnn ops


def _online_max_sum_impl(input: Tensor, weight: Tensor, target: Tensor, vocab_start_index: int,
                         vocab_end_index: int, return_logits: bool) -> Tuple[Tensor, ...]:
    sync_threads()
    results = _core.fused_linear_online_max_sum(as_numpy(input), as_numpy(weight), as_numpy(target),
                                                vocab_start_index, vocab_end_index, return_logits)
    logits = results[5]
    return tuple(from_numpy(r) for r in results[:5]) + (placeholder(input) if logits is None else from_numpy(logits),)


def _online_max_sum_fake(input, weight, target, vocab_start_index, vocab_end_index, return_logits):
    rows = input.shape[0]
    stat = input.new_empty([rows], dtype=torch.float32)
    logits = input.new_empty([rows, weight.shape[0]]) if return_logits else input.new_empty([0])
    return (stat, torch.empty_like(stat), torch.empty_like(stat),
            input.new_empty([(rows + 7) // 8], dtype=torch.uint8), target.new_empty([rows]), logits)


define("fused_linear_online_max_sum(Tensor input, Tensor weight, Tensor target, int vocab_start_index, "
       "int vocab_end_index, bool return_logits) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
       _online_max_sum_impl, _online_max_sum_fake)


def _loss_with_max_sum_impl(logits_max: Tensor, sum_exp_logits: Tensor, predicted_logits: Tensor,
                            label_smoothing: float, logits: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    sync_threads()
    loss, softmax = _core.fused_cross_entropy_loss_with_max_sum(as_numpy(logits_max), as_numpy(sum_exp_logits),
                                                                as_numpy(predicted_logits), label_smoothing,
                                                                optional_numpy(logits))
    return from_numpy(loss), placeholder(logits_max) if softmax is None else from_numpy(softmax)


def _loss_with_max_sum_fake(logits_max, sum_exp_logits, predicted_logits, label_smoothing, logits):
    softmax = logits_max.new_empty(logits.shape, dtype=torch.float32) if logits is not None else \
        logits_max.new_empty([0])
    return logits_max.new_empty(logits_max.shape, dtype=torch.float32), softmax


define("fused_cross_entropy_loss_with_max_sum(Tensor logits_max, Tensor sum_exp_logits, Tensor predicted_logits, "
       "float label_smoothing, Tensor? logits) -> (Tensor, Tensor)",
       _loss_with_max_sum_impl, _loss_with_max_sum_fake)


def _loss_grad_impl(grad: Tensor, input: Tensor, weight: Tensor, target_mask: Tensor, masked_target: Tensor,
                    label_smoothing: float, logits_max: Optional[Tensor], sum_exp_logits: Optional[Tensor],
                    softmax: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    sync_threads()
    grad_input, grad_weight = _core.fused_linear_cross_entropy_loss_grad(
        as_numpy(grad), as_numpy(input), as_numpy(weight), as_numpy(target_mask), as_numpy(masked_target),
        label_smoothing, optional_numpy(logits_max), optional_numpy(sum_exp_logits), optional_numpy(softmax))
    return from_numpy(grad_input), from_numpy(grad_weight)


def _loss_grad_fake(grad, input, weight, target_mask, masked_target, label_smoothing, logits_max, sum_exp_logits,
                    softmax):
    return input.new_empty(input.shape), weight.new_empty(weight.shape)


define("fused_linear_cross_entropy_loss_grad(Tensor grad, Tensor input, Tensor weight, Tensor target_mask, "
       "Tensor masked_target, float label_smoothing, Tensor? logits_max, Tensor? sum_exp_logits, "
       "Tensor? softmax) -> (Tensor, Tensor)", _loss_grad_impl, _loss_grad_fake)


# ---------------------------------------------------------------------------------------------------
# Single-process linear cross entropy. Two ops, chosen by the functional API:
#  - linear_cross_entropy: loss and the gradients in one call (mean/sum with autograd; bias, class
#    weights and label smoothing included); the backward only scales the saved gradients by the scalar
#    upstream gradient (skipped work: no logits kept, no recompute).
#  - linear_cross_entropy_rows: per-row losses from the statistics pass (one GEMM); the backward
#    recomputes the softmax block by block with the per-row upstream gradient ("none", or no grad).


def _linear_cross_entropy_impl(input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
                               class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
                               reduction: int, filter_eps: float,
                               filter_tolerance: float = 0.0,
                               filter_weight_average: bool = False,
                               softcap: float = 0.0) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    sync_threads()
    name = _MEAN_OR_SUM[reduction]
    results = _flce.fused_linear_cross_entropy(as_numpy(input), as_numpy(weight), as_numpy(target), ignore_index,
                                               name, bias=optional_numpy(bias),
                                               class_weight=optional_numpy(class_weight),
                                               label_smoothing=label_smoothing, softcap=softcap or None,
                                               filter_eps=filter_eps if filter_eps > 0.0 else None,
                                               filter_tolerance=filter_tolerance if filter_tolerance > 0.0 else None,
                                               filter_weight_bound="average" if filter_weight_average else "column")
    loss, grad_input, grad_weight = (from_numpy(r) for r in results[:3])
    grad_bias = from_numpy(results[3]) if bias is not None else placeholder(input)
    return loss, grad_input, grad_weight, grad_bias


def _linear_cross_entropy_fake(input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
                               filter_eps, filter_tolerance=0.0, filter_weight_average=False, softcap=0.0):
    grad_bias = bias.new_empty(bias.shape) if bias is not None else input.new_empty([0])
    return (input.new_empty([], dtype=torch.float32), input.new_empty(input.shape), weight.new_empty(weight.shape),
            grad_bias)


def _linear_cross_entropy_setup(ctx, inputs, output) -> None:
    input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction = inputs[:8]
    _, grad_input, grad_weight, grad_bias = output
    ctx.has_bias = bias is not None
    ctx.options = (ignore_index, label_smoothing, _MEAN_OR_SUM[reduction], inputs[11] if len(inputs) > 11 else 0.0)
    ctx.mark_non_differentiable(grad_input, grad_weight, grad_bias)
    # the inputs (references) only for a backward under grad mode (second derivatives)
    ctx.save_for_backward(grad_input, grad_weight, grad_bias, input, weight, target, bias, class_weight)


def _linear_cross_entropy_grad(ctx, grad_loss, unused_grad_input, unused_grad_weight, unused_grad_bias):
    """The gradients were computed in the forward for an upstream gradient of 1: scale them (under
    grad mode: recomputed through the differentiable composite)."""
    saved = ctx.saved_tensors
    if torch.is_grad_enabled():
        gi, gw, gb = _composite_grads(grad_loss, *saved[3:], *ctx.options)
        return gi, gw, None, gb, None, None, None, None, None, None, None, None
    scale = grad_loss.to(torch.float32)
    scaled = [(g * scale).to(g.dtype) for g in saved[:3]]
    return (scaled[0], scaled[1], None, scaled[2] if ctx.has_bias else None, None, None, None, None, None, None, None,
            None)


define("linear_cross_entropy(Tensor input, Tensor weight, Tensor target, Tensor? bias, Tensor? class_weight, "
       "int ignore_index, float label_smoothing, int reduction, float filter_eps, float filter_tolerance=0.0, "
       "bool filter_weight_average=False, float softcap=0.0) "
       "-> (Tensor, Tensor, Tensor, Tensor)",
       _linear_cross_entropy_impl, _linear_cross_entropy_fake,
       (_linear_cross_entropy_grad, _linear_cross_entropy_setup))


def _target_in_vocabulary(target: np.ndarray, vocab: int, ignore_index: int) -> np.ndarray:
    """True where the row is kept; IndexError for a target outside [0, vocab) that is not ignore_index."""
    kept = target != ignore_index
    bad = kept & ((target < 0) | (target >= vocab))
    if bad.any():
        row = int(np.argmax(bad))
        raise IndexError(f"linear_cross_entropy: target[{row}] must be in [0, {vocab}) or ignore_index "
                         f"({ignore_index}), got {int(target[row])}")
    return kept


def _linear_cross_entropy_rows_impl(input: Tensor, weight: Tensor, target: Tensor,
                                    ignore_index: int) -> Tuple[Tensor, Tensor, Tensor]:
    sync_threads()
    vocab = weight.shape[0]
    kept = _target_in_vocabulary(as_numpy(target), vocab, ignore_index)
    logits_max, sum_exp, predicted, _, _, _ = _core.fused_linear_online_max_sum(
        as_numpy(input), as_numpy(weight), as_numpy(target), 0, vocab, False)
    loss, _ = _core.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted, 0.0, None)
    loss[~kept] = 0.0
    return from_numpy(loss), from_numpy(logits_max), from_numpy(sum_exp)


def _linear_cross_entropy_rows_fake(input, weight, target, ignore_index):
    rows = input.new_empty([input.shape[0]], dtype=torch.float32)
    return rows, torch.empty_like(rows), torch.empty_like(rows)


def _linear_cross_entropy_rows_setup(ctx, inputs, output) -> None:
    input, weight, target, ignore_index = inputs
    _, logits_max, sum_exp = output
    ctx.ignore_index = ignore_index
    ctx.mark_non_differentiable(logits_max, sum_exp)
    ctx.save_for_backward(input, weight, target, logits_max, sum_exp)


def _linear_cross_entropy_rows_grad(ctx, grad_loss, unused_max, unused_sum):
    input, weight, target, logits_max, sum_exp = ctx.saved_tensors
    if torch.is_grad_enabled():  # second derivatives: the differentiable composite
        gi, gw, _ = _composite_grads(grad_loss, input, weight, target, None, None, ctx.ignore_index, 0.0, "none",
                                     0.0)
        return gi, gw, None, None
    kept = target != ctx.ignore_index
    grad_rows = torch.where(kept, grad_loss.to(torch.float32), 0.0)
    masked_target = torch.where(kept, target, 0)
    grad_input, grad_weight = torch.ops.tilegrad.fused_linear_cross_entropy_loss_grad(
        grad_rows, input, weight, ~kept, masked_target, 0.0, logits_max, sum_exp, None)
    return grad_input, grad_weight, None, None


define("linear_cross_entropy_rows(Tensor input, Tensor weight, Tensor target, int ignore_index) "
       "-> (Tensor, Tensor, Tensor)", _linear_cross_entropy_rows_impl, _linear_cross_entropy_rows_fake,
       (_linear_cross_entropy_rows_grad, _linear_cross_entropy_rows_setup))


# ---------------------------------------------------------------------------------------------------
# Eager node


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
    ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, weight_average, softcap = options
    sync_threads()
    results = _flce.fused_linear_cross_entropy(
        as_numpy(input), as_numpy(weight), as_numpy(target), ignore_index, REDUCTION_NAMES[reduction],
        bias=optional_numpy(bias), class_weight=optional_numpy(class_weight), label_smoothing=label_smoothing,
        softcap=softcap or None,
        grad_output=None if grad_output is None else as_numpy(grad_output),
        filter_eps=filter_eps if filter_eps > 0.0 else None,
        filter_tolerance=filter_tolerance if filter_tolerance > 0.0 else None,
        filter_weight_bound="average" if weight_average else "column",
        grad_input=wanted[0], grad_weight=wanted[1], grad_bias=wanted[2] and bias is not None)
    loss, gi, gw = results[:3]
    gb = results[3] if bias is not None else None
    return tuple(None if r is None else from_numpy(r) for r in (loss, gi, gw, gb))


def _float32_composite(input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
                       class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
                       reduction: str, softcap: float = 0.0) -> Tensor:
    """``F.linear`` (+ the logit softcap) + ``F.cross_entropy`` with float32 logits (the fused op's
    numerics), differentiable to any order: the second-derivative path and the softcap's composite."""
    logits = F.linear(input.float(), weight.float(), None if bias is None else bias.float())
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    # torch's own cross entropy (F.cross_entropy is tilegrad's after tilegrad.torch.enable(), whose node
    # has no second derivative)
    return TORCH_FUNCTIONS["cross_entropy"](logits, target, class_weight, ignore_index=ignore_index,
                                            reduction=reduction, label_smoothing=label_smoothing)


def _composite_grads(grad_loss: Tensor, input: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
                     class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float, reduction: str,
                     softcap: float) -> list:
    """[d input, d weight, d bias] of the composite with ``create_graph=True`` (a backward run under
    grad mode; None for a tensor that needs no gradient): the saved tensors carry their history, so
    the result is differentiable again."""
    def loss(input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        return _float32_composite(input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
                                  softcap)

    return recompute_grads(loss, (input, weight, bias), (grad_loss.to(torch.float32),))  # the composite's loss dtype


class LinearCrossEntropyFunction(torch.autograd.Function):
    """``(rows (BT, H), weight (V, H), target (BT,), bias, class_weight fp32, ignore_index,
    label_smoothing, reduction code, filter_eps, filter_tolerance, filter_weight_average, softcap)`` ->
    float32 loss (scalar, or (BT,) for "none")."""

    @staticmethod
    def forward(ctx, input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
                filter_eps, filter_tolerance, filter_weight_average, softcap=0.0):
        needs = ctx.needs_input_grad
        wanted = (needs[0], needs[1], bias is not None and needs[3])
        options = (ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, filter_weight_average,
                   softcap)
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
            grads = _composite_grads(grad_loss, *ctx.saved_tensors, ignore_index, label_smoothing,
                                     REDUCTION_NAMES[reduction], ctx.options[6])
        else:
            grads = _backward(ctx, grad_loss)
        return grads[0], grads[1], None, grads[2], None, None, None, None, None, None, None, None


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


def _kernel_loss(rows: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], class_weight: Optional[Tensor],
                 ignore_index: int, label_smoothing: float, reduction: int, filter_eps: float,
                 filter_tolerance: float = 0.0, filter_weight_average: bool = False, softcap: float = 0.0) -> Tensor:
    if not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (rows, weight, bias))):
        # no autograd node: the loss alone (its needs_input_grad would still say requires_grad)
        options = (ignore_index, label_smoothing, reduction, filter_eps, filter_tolerance, filter_weight_average,
                   softcap)
        return _fused(rows, weight, target, bias, class_weight, options, (False, False, False))[0]
    return LinearCrossEntropyFunction.apply(rows, weight, target, bias, class_weight, ignore_index, label_smoothing,
                                            reduction, filter_eps, filter_tolerance, filter_weight_average, softcap)


def _flatten_rows(input: Tensor) -> Tensor:
    """(..., H) -> (rows, H); explicit row count, so H = 0 works (reshape(-1, 0) is ambiguous)."""
    return input.reshape(math.prod(input.shape[:-1]), input.shape[-1])


# ---------------------------------------------------------------------------------------------------
# Public function


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Optional[Tensor] = None, weight: Optional[Tensor] = None,
                         reduction: str = "mean", ignore_index: Optional[int] = -100, label_smoothing: float = 0.0,
                         options=None, filter_eps: Union[None, str, float] = None,
                         filter_tolerance: Optional[float] = None, filter_weight_bound: str = "column",
                         loss_dtype: Optional[torch.dtype] = None, softcap: Optional[float] = None) -> Tensor:
    """``F.linear_cross_entropy(input, linear_weight, target)`` without the ``(rows, V)`` logits.

    ``input`` (..., H), ``linear_weight`` (V, H), ``target`` (...) class indices, with ``linear_bias``,
    class ``weight``, ``label_smoothing`` and every reduction on tilegrad's single-process fused
    linear cross entropy (the logits are formed chunk by chunk and never whole; the plan follows
    ``TILEGRAD_FLCE_BUDGET``). Only the gradients autograd needs are computed (a frozen
    ``linear_weight`` gets no weight gradient). mean / sum: the forward computes the loss and the
    gradients in one pass when no other such call is pending, else the loss alone and the backward
    recomputes (so several forwards before one backward hold no weight-sized buffers); see
    ``tilegrad/torch/_linear_cross_entropy.py``. The loss has ``input``'s dtype (as torch's); under
    CPU autocast the projection runs in the autocast dtype as ``F.linear`` would and the loss is
    float32. Second derivatives (``create_graph=True``) recompute through ``F.linear`` +
    ``F.cross_entropy``; under ``torch.func`` transforms, for tiny float32 problems (below the
    crossover's multiply-adds, ``CROSSOVER["linear_cross_entropy"]``, where torch is faster; float16
    / bfloat16 take the kernel at every size) and for what the kernels do not take (K-dimensional
    weights, float64, ...) torch's ``F.linear_cross_entropy`` runs, with ``options`` (its chunking)
    passed on (class weights in the logits' dtype, int32 targets as int64, as it needs).

    ``filter_eps`` / ``filter_tolerance`` (tilegrad extensions; None: exact): gradient filtering as in
    :func:`tilegrad.fused_linear_cross_entropy` (``"auto"``: error-bounded at the dtype's unit
    roundoff, 2**-8 for bfloat16) on the fused path (mean/sum with autograd); the loss is always exact.
    ``filter_weight_bound``: grad_weight's bound under bounded filtering, ``"column"`` or ``"average"``
    (see :func:`tilegrad.fused_linear_cross_entropy`).
    Where torch's function runs (the cases above, tiny problems included) nothing is filtered.

    ``loss_dtype`` (tilegrad extension; None: as above): the dtype of the returned loss.
    ``torch.float32`` with 16-bit inputs returns the fused op's float32 loss unrounded (what Hugging
    Face's causal-LM loss gives, which upcasts the logits first); where torch's function runs, the
    projection is then computed in float32 too, so the loss is never rounded to 16 bits on the way.

    ``softcap`` (tilegrad extension; None: no cap): the logits are capped as ``softcap * tanh(z /
    softcap)`` before the cross entropy (Gemma 2's ``final_logit_softcapping``), inside the fused op;
    where the fused op does not run, torch ops compute the capped float32 logits whole.
    """
    check_reduction("linear_cross_entropy", reduction)
    cap = _check_softcap(softcap)
    # (other dtypes take the composite path, where nothing is filtered: any valid value will do)
    eps, tol = filter_settings(filter_eps, filter_tolerance, numpy_dtype(input.dtype) or numpy_dtype(torch.float32))
    weight_average = filter_weight_average(filter_weight_bound)
    if ignore_index is None:
        ignore_index = -100
    result_dtype = _check_loss_dtype(loss_dtype) or input.dtype
    cast = autocast_dtype(input, linear_weight)
    if cast is not None:  # autocast runs the projection in its dtype and cross entropy in float32
        input, linear_weight = input.to(cast), linear_weight.to(cast)
        linear_bias = None if linear_bias is None else linear_bias.to(cast)
        result_dtype = loss_dtype or torch.float32
    args = (input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing)
    supported = _linear_cross_entropy_on_kernel(input, linear_weight, target, linear_bias, weight)
    path = route(supported, input.dtype, linear_cross_entropy=multiply_adds(input, linear_weight))
    if cap and path in (Path.TORCH, Path.COMPOSITE):
        return _softcap_composite(*args, cap).to(result_dtype)
    if path in (Path.TORCH, Path.COMPOSITE):
        return _linear_cross_entropy_composite(*_widened(args, result_dtype), options).to(result_dtype)
    rows = _flatten_rows(input)
    if path is Path.COMPILE:
        loss = _linear_cross_entropy_ops(rows, *args[1:], eps, tol, weight_average, result_dtype, cap)
    else:
        class_weight = None if weight is None else weight.to(torch.float32)
        loss = _kernel_loss(rows, linear_weight, target.reshape(-1), linear_bias, class_weight, ignore_index,
                            label_smoothing, REDUCTION_CODES[reduction], eps, tol, weight_average, cap)
    return (loss.view(target.shape) if reduction == "none" else loss).to(result_dtype)


def _check_softcap(softcap) -> float:
    """The op's softcap (0.0: none) of ``softcap``: None or inf for no cap, else a finite float > 0."""
    if softcap is None:
        return 0.0
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
        raise TypeError(f"tilegrad.torch.linear_cross_entropy: softcap must be None or a float > 0, got {softcap!r}")
    if math.isinf(softcap) and softcap > 0:
        return 0.0
    if not softcap > 0:
        raise ValueError(f"tilegrad.torch.linear_cross_entropy: softcap must be None or a float > 0, got {softcap!r}")
    return float(softcap)


def _softcap_composite(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing,
                       softcap):
    """The capped logits whole in float32 torch ops (torch's F.linear_cross_entropy has no softcap): what
    the fused op does not take, tiny problems, torch.func transforms."""
    if target.dtype == torch.int32:
        target = target.long()
    if input.dim() > 2 and linear_weight.dim() == 2:
        loss = _softcap_composite(_flatten_rows(input), linear_weight, target.reshape(-1), linear_bias, weight,
                                  reduction, ignore_index, label_smoothing, softcap)
        return loss.view(target.shape) if reduction == "none" else loss
    class_weight = None if weight is None else weight.float()
    return _float32_composite(input, linear_weight, target, linear_bias, class_weight, ignore_index, label_smoothing,
                              reduction, softcap)


def _check_loss_dtype(loss_dtype) -> Optional[torch.dtype]:
    if loss_dtype is not None and not (isinstance(loss_dtype, torch.dtype) and loss_dtype.is_floating_point):
        raise TypeError(f"tilegrad.torch.linear_cross_entropy: loss_dtype must be None or a floating-point "
                        f"torch.dtype (torch.float32 for an unrounded float32 loss), got {loss_dtype!r}")
    return loss_dtype


def _widened(args: tuple, result_dtype: torch.dtype) -> tuple:
    """``(input, linear_weight, target, linear_bias, ...)`` with the projection's operands in
    ``result_dtype`` where that is wider than the input's: torch's composite then forms float32
    logits as the fused op does, instead of a 16-bit loss that a cast could not unround."""
    input, linear_weight, target, linear_bias = args[:4]
    if not (input.is_floating_point() and result_dtype.itemsize > input.dtype.itemsize):
        return args
    linear_bias = None if linear_bias is None else linear_bias.to(result_dtype)
    return (input.to(result_dtype), linear_weight.to(result_dtype), target, linear_bias) + args[4:]


def _linear_cross_entropy_on_kernel(input, linear_weight, target, linear_bias, weight) -> bool:
    """The tensors the fused op takes: CPU float32/16/bf16 (V, H) weight, class-index target shaped
    like input's rows, 1-D bias of input's dtype, class weights that need no gradient."""
    return (linear_weight.dim() == 2 and input.dim() >= 1 and on_kernel_path(input, linear_weight, linear_bias)
            and is_index_tensor(target) and input.dtype == linear_weight.dtype
            and (linear_bias is None or (linear_bias.dtype == input.dtype and linear_bias.dim() == 1))
            and input.shape[-1] == linear_weight.shape[-1] and tuple(target.shape) == tuple(input.shape[:-1])
            and not requires_grad(weight))


def _linear_cross_entropy_ops(rows, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                              label_smoothing, eps, tol, weight_average, result_dtype, softcap=0.0):
    """Under torch.compile: the torch.ops.tilegrad ops (they have fake kernels)."""
    wants_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                                 for t in (rows, linear_weight, linear_bias))
    if wants_grad and reduction != "none":
        class_weight = None if weight is None else weight.to(torch.float32)
        loss, _, _, _ = torch.ops.tilegrad.linear_cross_entropy(rows, linear_weight, target.reshape(-1), linear_bias,
                                                               class_weight, ignore_index, label_smoothing,
                                                               REDUCTION_CODES[reduction], eps, tol,
                                                               weight_average, softcap)
        return loss
    if softcap:
        return _softcap_composite(rows, linear_weight, target.reshape(-1), linear_bias, weight, reduction,
                                  ignore_index, label_smoothing, softcap)
    if linear_bias is None and weight is None and label_smoothing == 0.0:
        return _linear_cross_entropy_rows(rows, linear_weight, target, reduction, ignore_index)
    args = (rows, linear_weight, target.reshape(-1), linear_bias, weight, reduction, ignore_index, label_smoothing)
    return _linear_cross_entropy_composite(*_widened(args, result_dtype), None)


def _linear_cross_entropy_rows(rows, linear_weight, target, reduction, ignore_index):
    """The float32 loss from the statistics pass (one GEMM); the backward recomputes per row."""
    flat_target = target.reshape(-1)
    row_loss, _, _ = torch.ops.tilegrad.linear_cross_entropy_rows(rows, linear_weight, flat_target, ignore_index)
    if reduction == "none":
        return row_loss
    total = row_loss.sum()
    return total / (flat_target != ignore_index).sum() if reduction == "mean" else total


def _linear_cross_entropy_composite(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                                    label_smoothing, options):
    """torch's own F.linear_cross_entropy, with the caller's ``options`` (its chunking): what the fused
    op does not take, tiny float32 problems and torch.func transforms. torch takes (N, H) / (H,) inputs
    only: (..., H) goes as rows; class weights in the logits' dtype and int32 targets as int64, as
    torch's cross_entropy needs."""
    if weight is not None and weight.dtype != input.dtype and input.is_floating_point():
        weight = weight.to(input.dtype)
    if target.dtype == torch.int32:
        target = target.long()
    if input.dim() > 2 and linear_weight.dim() == 2 and not target.is_floating_point():
        loss = _linear_cross_entropy_composite(_flatten_rows(input), linear_weight, target.reshape(-1),
                                               linear_bias, weight, reduction, ignore_index, label_smoothing, options)
        return loss.view(target.shape) if reduction == "none" else loss
    return TORCH_FUNCTIONS["linear_cross_entropy"](input, linear_weight, target, linear_bias=linear_bias,
                                                   weight=weight, reduction=reduction, ignore_index=ignore_index,
                                                   label_smoothing=label_smoothing, options=options)
