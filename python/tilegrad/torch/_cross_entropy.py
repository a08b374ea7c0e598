"""Cross entropy in PyTorch (``aclnnCrossEntropyLoss``, ``aclnnCrossEntropyLossGrad``; logits (N, C)):
``tilegrad.torch.cross_entropy``, with a z-loss beyond torch's.

- ``tilegrad::cross_entropy_loss`` (autograd on ``tilegrad::cross_entropy_loss_grad``): the
  ``torch.compile`` path.
- :class:`TilegradCrossEntropy`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``): torch's cross entropy per row on
  float32 logits plus the z-loss, reduced in a fixed order, rounded once.

The forward saves only ``log_prob`` (and ``lse`` with a z-loss); the backward is one fused pass over
it. Second derivatives are refused: the logits are not saved.
"""

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from .. import _core
from ._eager import (TORCH_FUNCTIONS, Path, autocast_dtype, check_reduction, fixed_order_sum, is_index_tensor,
                     legacy_reduction, on_kernel_path, reduced, requires_grad, route, widened)
from ._library import define, placeholder
from ._tensor import as_numpy, from_numpy, new_output, optional_numpy, sync_threads, unsupported_reason

# ---------------------------------------------------------------------------------------------------
# torch.library ops


def _reduced_shape(reduction: str, rows: int) -> List[int]:
    """Shape of a loss: one value per row for "none", a scalar otherwise."""
    return [rows] if reduction == "none" else []


def _cross_entropy_loss_impl(input: Tensor, target: Tensor, weight: Optional[Tensor], reduction: str,
                             ignore_index: int, label_smoothing: float, z_loss_scale: float,
                             return_zloss: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    sync_threads()
    log_prob = new_output(input.shape, input.dtype)
    loss, _, zloss, lse = _core.cross_entropy_loss(as_numpy(input), as_numpy(target), optional_numpy(weight),
                                                   reduction, ignore_index, label_smoothing, z_loss_scale,
                                                   return_zloss, as_numpy(log_prob))
    if not return_zloss:
        return from_numpy(loss), log_prob, placeholder(input), placeholder(input)
    return from_numpy(loss), log_prob, from_numpy(zloss), from_numpy(lse)


def _cross_entropy_loss_fake(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                             return_zloss):
    loss_shape = _reduced_shape(reduction, input.shape[0])
    loss = input.new_empty(loss_shape)
    log_prob = input.new_empty(input.shape)  # contiguous, as the kernel's output
    if not return_zloss:
        return loss, log_prob, input.new_empty([0]), input.new_empty([0])
    return loss, log_prob, input.new_empty(loss_shape), input.new_empty([input.shape[0]])


def _cross_entropy_loss_setup(ctx, inputs, output) -> None:
    input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale, return_zloss = inputs
    _, log_prob, _, lse = output
    ctx.mark_non_differentiable(log_prob, lse)
    _save_context(ctx, target, weight, log_prob, lse, (reduction, ignore_index, label_smoothing, z_loss_scale),
                  return_zloss)


def _save_context(ctx, target: Tensor, weight: Optional[Tensor], log_prob: Tensor, lse: Tensor,
                  options: Tuple[str, int, float, float], return_zloss: bool) -> None:
    """What the backward needs: log_prob (and lse for the z-loss), target and weight; no input."""
    ctx.options = options
    # No zero-filled input-sized gradient for log_prob (measured: a fresh page-faulted buffer per backward).
    ctx.set_materialize_grads(False)
    ctx.has_zloss = return_zloss and options[3] != 0.0
    ctx.save_for_backward(log_prob, target, weight, lse if ctx.has_zloss else None)


_SECOND_DERIVATIVE_ERROR = (
    "tilegrad.torch.cross_entropy: second derivatives (a backward with create_graph=True) are not supported "
    "on tilegrad's path, which saves log_prob instead of the logits; use torch.nn.functional.cross_entropy "
    "for this loss (or tilegrad.torch.disable() / unpatch())")


def _grad_formula(ctx, grad_loss: Tensor, grad_zloss: Optional[Tensor], kernel) -> Tensor:
    """The input gradient on both paths (``kernel``: the op, or the core directly). With grad mode on
    (``create_graph=True``) it refuses: the logits are not saved, so no exact second derivative exists."""
    if torch.is_grad_enabled():
        raise RuntimeError(_SECOND_DERIVATIVE_ERROR)
    log_prob, target, weight, lse = ctx.saved_tensors
    reduction, ignore_index, label_smoothing, z_loss_scale = ctx.options
    # Grads are not materialized: a loss term that was not differentiated has a zero gradient.
    loss_shape = _reduced_shape(reduction, log_prob.shape[0])
    grad_loss = log_prob.new_zeros(loss_shape) if grad_loss is None else grad_loss
    grad_zloss = (log_prob.new_zeros(loss_shape) if grad_zloss is None else grad_zloss) if ctx.has_zloss else None
    return kernel(grad_loss, log_prob, target, weight, grad_zloss, lse, reduction, ignore_index, label_smoothing,
                  z_loss_scale if ctx.has_zloss else 0.0)


def _cross_entropy_loss_grad_formula(ctx, grad_loss, grad_log_prob, grad_zloss, grad_lse):
    grad_input = _grad_formula(ctx, grad_loss, grad_zloss, torch.ops.tilegrad.cross_entropy_loss_grad)
    return grad_input, None, None, None, None, None, None, None


define("cross_entropy_loss(Tensor input, Tensor target, Tensor? weight, str reduction, int ignore_index, "
       "float label_smoothing, float z_loss_scale, bool return_zloss) -> (Tensor, Tensor, Tensor, Tensor)",
       _cross_entropy_loss_impl, _cross_entropy_loss_fake,
       (_cross_entropy_loss_grad_formula, _cross_entropy_loss_setup))


def _cross_entropy_loss_grad_impl(grad_loss: Tensor, log_prob: Tensor, target: Tensor, weight: Optional[Tensor],
                                  grad_zloss: Optional[Tensor], lse_for_zloss: Optional[Tensor], reduction: str,
                                  ignore_index: int, label_smoothing: float, z_loss_scale: float) -> Tensor:
    sync_threads()
    out = new_output(log_prob.shape, log_prob.dtype)
    _core.cross_entropy_loss_grad(as_numpy(grad_loss), as_numpy(log_prob), as_numpy(target), optional_numpy(weight),
                                  optional_numpy(grad_zloss), optional_numpy(lse_for_zloss), reduction, ignore_index,
                                  label_smoothing, z_loss_scale, as_numpy(out))
    return out


def _cross_entropy_loss_grad_fake(grad_loss, log_prob, target, weight, grad_zloss, lse_for_zloss, reduction,
                                  ignore_index, label_smoothing, z_loss_scale):
    return log_prob.new_empty(log_prob.shape)


define("cross_entropy_loss_grad(Tensor grad_loss, Tensor log_prob, Tensor target, Tensor? weight, "
       "Tensor? grad_zloss, Tensor? lse_for_zloss, str reduction, int ignore_index, float label_smoothing, "
       "float z_loss_scale) -> Tensor",
       _cross_entropy_loss_grad_impl, _cross_entropy_loss_grad_fake)


# ---------------------------------------------------------------------------------------------------
# Eager node and public function


class TilegradCrossEntropy(torch.autograd.Function):
    """``aclnnCrossEntropyLoss`` forward, ``aclnnCrossEntropyLossGrad`` backward; (N, C) logits.
    Returns ``(loss, zloss)``, ``zloss`` a 0-element placeholder without a z-loss."""

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, weight: Optional[Tensor], reduction: str, ignore_index: int,
                label_smoothing: float, z_loss_scale: float, return_zloss: bool):
        loss, log_prob, zloss, lse = _cross_entropy_loss_impl(input, target, weight, reduction, ignore_index,
                                                              label_smoothing, z_loss_scale, return_zloss)
        _save_context(ctx, target, weight, log_prob, lse, (reduction, ignore_index, label_smoothing, z_loss_scale),
                      return_zloss)
        return loss, zloss

    @staticmethod
    def backward(ctx, grad_loss: Tensor, grad_zloss: Tensor):
        grad_input = _grad_formula(ctx, grad_loss, grad_zloss, _cross_entropy_loss_grad_impl)
        return grad_input, None, None, None, None, None, None, None


def cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                  size_average: Optional[bool] = None, ignore_index: int = -100, reduce: Optional[bool] = None,
                  reduction: str = "mean", label_smoothing: float = 0.0, *, z_loss_scale: float = 0.0,
                  return_z_loss: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """``F.cross_entropy`` on tilegrad's ``aclnnCrossEntropyLoss`` / ``aclnnCrossEntropyLossGrad``.

    Input ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)`` with class-index targets (int64/int32);
    ``weight`` (C,), ``ignore_index``, ``reduction`` and ``label_smoothing`` as torch's. Beyond torch:
    ``z_loss_scale`` adds ``z_loss_scale * lse**2`` per kept row (the z-loss of large-model
    recipes, ``lse`` = log-sum-exp of the row's logits), reduced like the loss; with
    ``return_z_loss=True`` the result is ``(loss, z_loss)``, ``z_loss`` being that term alone.

    The forward saves only ``log_prob`` (and ``lse`` with a z-loss) for the backward, which is one
    fused pass over it. Probability targets, and tensors tilegrad cannot take, go to torch's
    ``F.cross_entropy`` (z-loss is then an error, since torch has none).
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction("cross_entropy", reduction)
    if autocast_dtype(input) is not None:
        input = input.float()  # as torch's autocast does for cross_entropy
    wants_zloss = z_loss_scale != 0.0 or return_z_loss
    supported = (on_kernel_path(input) and is_index_tensor(target) and input.dim() >= 1 and not requires_grad(weight)
                 and (weight is None or unsupported_reason(weight, (torch.float32, torch.float16, torch.bfloat16,
                                                                     torch.float64)) is None))
    classes = input.shape[1] if input.dim() >= 2 else input.numel()
    path = route(supported, input.dtype, cross_entropy=input.numel(), cross_entropy_classes=classes)
    if path is Path.TORCH:
        if wants_zloss:
            raise ValueError("cross_entropy: z_loss_scale / return_z_loss need tilegrad's path (CPU float32, "
                             f"float16 or bfloat16 logits and int64/int32 class targets), got input "
                             f"{input.dtype} on {input.device}, target {target.dtype}")
        return TORCH_FUNCTIONS["cross_entropy"](input, target, weight, ignore_index=ignore_index,
                                                reduction=reduction, label_smoothing=label_smoothing)
    weight32 = None if weight is None else weight.to(torch.float32)
    args = (path, weight32, reduction, ignore_index, label_smoothing, z_loss_scale, wants_zloss)
    if input.dim() <= 2:
        loss, zloss = _cross_entropy_2d(input, target, *args)
    else:
        loss, zloss = _cross_entropy_kdim(input, target, *args)
    return (loss, zloss) if return_z_loss else loss


def _cross_entropy_rows(input, target, path, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                        wants_zloss):
    """(N, C) logits, (N,) targets on ``path`` (compile, composite or kernel); ``(loss, zloss or None)``."""
    if path is Path.COMPOSITE:
        return _cross_entropy_composite(input, target, weight, reduction, ignore_index, label_smoothing,
                                        z_loss_scale, wants_zloss)
    if path is Path.COMPILE:
        loss, _, zloss, _ = torch.ops.tilegrad.cross_entropy_loss(input, target, weight, reduction, ignore_index,
                                                                 label_smoothing, z_loss_scale, wants_zloss)
    else:
        loss, zloss = TilegradCrossEntropy.apply(input, target, weight, reduction, ignore_index, label_smoothing,
                                                 z_loss_scale, wants_zloss)
    return loss, (zloss if wants_zloss else None)


def _cross_entropy_composite(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                             wants_zloss):
    """The kernel's numerics in torch ops: torch's cross entropy per row on float32 logits and class
    weights (int32 targets as int64, which torch's takes), plus the z-loss ``z_loss_scale * lse**2``
    per kept row, reduced in a fixed order (mean: the loss over the kept rows' class weights, the
    z-loss over the kept rows, as torch's and the kernel's), each result rounded once to the logits'
    dtype; differentiable."""
    logits, weight32 = widened(input, weight)
    target = target.long()
    rows = TORCH_FUNCTIONS["cross_entropy"](logits, target, weight32, ignore_index=ignore_index, reduction="none",
                                            label_smoothing=label_smoothing)
    kept = target != ignore_index
    kept_rows = fixed_order_sum(kept.float())
    kept_weight = kept_rows if weight32 is None else fixed_order_sum(
        torch.where(kept, weight32[torch.where(kept, target, 0)], 0.0))
    loss = reduced(rows, reduction, kept_weight)
    if not wants_zloss:
        return loss.to(input.dtype), None
    zloss = reduced(torch.where(kept, z_loss_scale * torch.logsumexp(logits, dim=1).square(), 0.0), reduction,
                    kept_rows)
    return (loss + zloss).to(input.dtype), zloss.to(input.dtype)


def _cross_entropy_2d(input, target, path, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                      wants_zloss):
    """(N, C) or (C,) input: one call."""
    single = input.dim() == 1
    if single:
        if target.dim() != 0:
            raise ValueError(f"cross_entropy: a (C,) input needs a 0-d target, got target shape {tuple(target.shape)}")
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    loss, zloss = _cross_entropy_rows(input, target, path, weight, reduction, ignore_index, label_smoothing,
                                      z_loss_scale, wants_zloss)
    if single and reduction == "none":
        loss, zloss = loss.squeeze(0), (zloss.squeeze(0) if wants_zloss else zloss)
    return loss, zloss


def _cross_entropy_kdim(input, target, path, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                        wants_zloss):
    """(N, C, d1, ...): one (N * d1 * ..., C) row matrix (class dimension last; a copy unless the
    layout is already channels-last) through one call. The kernel's reductions over those rows are
    torch's K-dimensional ones (mean: over the kept rows' class weights), so nothing is reduced here."""
    batch, classes = input.shape[0], input.shape[1]
    spatial = input.shape[2:]
    if tuple(target.shape) != (batch, *spatial):
        raise ValueError(f"cross_entropy: target shape must be {(batch, *spatial)} for input shape "
                         f"{tuple(input.shape)}, got {tuple(target.shape)}")
    if input.numel() == 0:  # no rows to hand to the kernel; torch's answer (empty or NaN) is the rule
        if wants_zloss:
            raise ValueError(f"cross_entropy: z-loss needs a non-empty input, got shape {tuple(input.shape)}")
        return _cross_entropy_composite(input, target, weight, reduction, ignore_index, label_smoothing, 0.0, False)
    rows = input.movedim(1, -1).reshape(-1, classes)
    loss, zloss = _cross_entropy_rows(rows, target.reshape(-1), path, weight, reduction, ignore_index,
                                      label_smoothing, z_loss_scale, wants_zloss)
    if reduction == "none":
        return loss.view(target.shape), (zloss.view(target.shape) if wants_zloss else None)
    return loss, zloss
