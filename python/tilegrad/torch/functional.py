"""``torch.nn.functional``-compatible functions whose backward runs on tilegrad's kernels.

Same signatures, defaults and results as torch's. Each function sends what tilegrad supports
(CPU dense float32 / float16 / bfloat16 tensors, class-index targets, ...) to the ``tilegrad::``
kernels and everything else to torch's own function, so a call never gives a wrong result and never
copies a large tensor behind the caller's back.

=====================================  =======================================  ===================================
tilegrad.torch                         torch equivalent                         falls back to torch's function for
=====================================  =======================================  ===================================
``silu(input, inplace=False)``         ``F.silu``                               ``inplace=True``
``cross_entropy(...)``                 ``F.cross_entropy`` (+ z-loss)           probability targets, class weights
                                                                                that require grad
``embedding(...)``                     ``F.embedding``                          ``max_norm``, ``sparse=True``, 0-d
                                                                                indices
``binary_cross_entropy_with_logits``   ``F.binary_cross_entropy_with_logits``   a target shaped unlike the input,
                                                                                weight / pos_weight that require
                                                                                grad
``linear_cross_entropy(...)``          ``F.linear_cross_entropy``               K-dim weights, a weight or bias of
                                                                                another dtype than the input, class
                                                                                weights that require grad
=====================================  =======================================  ===================================

Every function also falls back for tensors off the CPU, sparse tensors, tensor subclasses and other
dtypes (e.g. float64). Where it does not, the same arguments are accepted and the results are as
precise at every size: eager calls below a measured size (``CROSSOVER``, shared with the decoder
functions) and calls under ``torch.func`` transforms run torch ops that compute what the kernel
computes (16-bit tensors widened to float32, each result rounded once; float32 class weights and
int32 targets as the kernel takes them). Exceptions, to avoid a float32 copy of a whole weight:
``embedding`` and ``linear_cross_entropy`` with 16-bit weights take the kernel at every size, and
under ``torch.func`` run torch's own functions (16-bit gradient sums as torch's). ``torch.compile``
always takes the ``torch.ops.tilegrad`` ops.
"""

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import functional as F

from . import _linear_cross_entropy as _LCE
from . import _ops  # noqa: F401  (registers torch.ops.tilegrad)
from .._fused_linear_cross_entropy import filter_settings, filter_weight_average
from ._autograd import TilegradBceWithLogits, TilegradCrossEntropy, TilegradEmbedding, TilegradSilu
# CROSSOVER: the one crossover registry of every tilegrad.torch function (also read as functional.CROSSOVER)
from ._eager import CROSSOVER, Path, fixed_order_sum, needs_autograd, on_kernel_path, route, widened  # noqa: F401
from ._tensor import numpy_dtype, unsupported_reason

__all__ = ["silu", "cross_entropy", "embedding", "binary_cross_entropy_with_logits", "linear_cross_entropy"]

# torch's own functions, captured before tilegrad.torch.enable() can reroute torch.nn.functional:
# every fallback below calls these, never the (possibly rerouted) module attribute.
TORCH_FUNCTIONS = {
    name: getattr(F, name)
    for name in ("silu", "cross_entropy", "embedding", "binary_cross_entropy_with_logits", "linear_cross_entropy")
    if hasattr(F, name)
}

_INDEX_DTYPES = (torch.int64, torch.int32)
_REDUCTIONS = ("none", "mean", "sum")


_on_kernel_path = on_kernel_path


def _needs_grad(t: Optional[Tensor]) -> bool:
    """An optional operand that requires grad (class weights, pos_weight): torch decides those cases."""
    return t is not None and t.requires_grad


def _is_index_tensor(t: Tensor) -> bool:
    return t.device.type == "cpu" and t.layout == torch.strided and t.dtype in _INDEX_DTYPES


def _legacy_reduction(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    """torch's deprecated size_average/reduce pair mapped to a reduction string, as torch does."""
    if size_average is None and reduce is None:
        return reduction
    from torch.nn import _reduction
    return _reduction.legacy_get_string(size_average, reduce, emit_warning=True)


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _autocast_dtype(*tensors: Tensor) -> Optional[torch.dtype]:
    """The CPU autocast dtype when autocast is on and applies to these tensors, else None."""
    if torch.is_autocast_enabled("cpu") and all(t.device.type == "cpu" for t in tensors):
        return torch.get_autocast_dtype("cpu")
    return None


# ---------------------------------------------------------------------------------------------------


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``F.silu``; the backward runs tilegrad's ``silu_backward`` (``aclnnSiluBackward``)."""
    path = route(not inplace and _on_kernel_path(input), input.dtype, wants_grad=needs_autograd(input),
                 silu=input.numel())
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["silu"](input, inplace=inplace)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.silu(input)
    if path is Path.COMPOSITE:  # torch's silu and silu_backward: float32 arithmetic, rounded once, as the kernel
        return torch._C._nn.silu(input)
    return TilegradSilu.apply(input)


# ---------------------------------------------------------------------------------------------------


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
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if _autocast_dtype(input) is not None:
        input = input.float()  # as torch's autocast does for cross_entropy
    wants_zloss = z_loss_scale != 0.0 or return_z_loss
    supported = (_on_kernel_path(input) and _is_index_tensor(target) and input.dim() >= 1 and not _needs_grad(weight)
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
    loss = _reduce(rows, reduction, kept_weight)
    if not wants_zloss:
        return loss.to(input.dtype), None
    zloss = _reduce(torch.where(kept, z_loss_scale * torch.logsumexp(logits, dim=1).square(), 0.0), reduction,
                    kept_rows)
    return (loss + zloss).to(input.dtype), zloss.to(input.dtype)


def _reduce(values: Tensor, reduction: str, mean_divisor) -> Tensor:
    """``values`` as they are ("none"), summed, or summed and divided by ``mean_divisor`` ("mean"); the
    sum in a fixed order (the same for any thread count)."""
    if reduction == "none":
        return values
    total = fixed_order_sum(values)
    return total / mean_divisor if reduction == "mean" else total


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


# ---------------------------------------------------------------------------------------------------


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``F.embedding``; the weight gradient runs tilegrad's ``embedding_dense_backward``
    (``aclnnEmbeddingDenseBackward``: deterministic, float32 row sums). ``max_norm`` and
    ``sparse=True`` go to torch's ``F.embedding``. float16 / bfloat16 weights take the kernel at every
    size, except under ``torch.func`` transforms, where torch's embedding runs (16-bit weight gradients
    then summed in 16 bits, as torch does: keeping float32 sums there would need a float32 copy of the
    whole weight)."""
    supported = (max_norm is None and not sparse and _on_kernel_path(weight) and _is_index_tensor(input)
                 and weight.dim() == 2 and input.dim() != 0)
    path = route(supported, weight.dtype, wants_grad=needs_autograd(weight),
                 embedding=input.numel() * math.prod(weight.shape[1:]))
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["embedding"](input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                                            sparse)
    padding_idx = _kernel_padding_idx(padding_idx, weight.shape[0])
    if path is Path.COMPILE:
        return torch.ops.tilegrad.embedding(weight, input, padding_idx, scale_grad_by_freq)
    if path is Path.COMPOSITE:  # the forward is torch's on every path; float32 weights: float32 row sums
        return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, False)
    return TilegradEmbedding.apply(weight, input, padding_idx, scale_grad_by_freq)


def _kernel_padding_idx(padding_idx: Optional[int], num_weights: int) -> int:
    """torch's padding_idx (None, or in [-num_weights, num_weights)) as the kernel's: -1 for none."""
    if padding_idx is None:
        return -1
    if not -num_weights <= padding_idx < num_weights:
        raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num_weights}), got {padding_idx}")
    return padding_idx % num_weights


# ---------------------------------------------------------------------------------------------------


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                                     size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                                     reduction: str = "mean", pos_weight: Optional[Tensor] = None) -> Tensor:
    """``F.binary_cross_entropy_with_logits``; the loss runs tilegrad's fused
    ``aclnnBinaryCrossEntropyWithLogits`` and the input gradient its
    ``aclnnBinaryCrossEntropyWithLogitsBackward`` (one pass each, weight and pos_weight broadcast); a
    target that requires grad gets torch's formula for its part."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    supported = (_on_kernel_path(input, target, weight, pos_weight) and input.shape == target.shape
                 and not _needs_grad(weight) and not _needs_grad(pos_weight))
    path = route(supported, input.dtype, binary_cross_entropy_with_logits=input.numel())
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](input, target, weight, reduction=reduction,
                                                                   pos_weight=pos_weight)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.binary_cross_entropy_with_logits_fused(input, target, weight, pos_weight,
                                                                         _ops.REDUCTION_CODES[reduction])
    if path is Path.COMPOSITE:
        return _bce_composite(input, target, weight, pos_weight, reduction)
    return TilegradBceWithLogits.apply(input, target, weight, pos_weight, _ops.REDUCTION_CODES[reduction])


def _bce_composite(input: Tensor, target: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
                   reduction: str) -> Tensor:
    """The kernels' numerics in torch ops: torch's function per element on float32 tensors, reduced in
    a fixed order, the loss rounded once to the target's dtype (the kernel's result dtype);
    differentiable, gradients rounded once."""
    x, y, w, pw = widened(input, target, weight, pos_weight)
    elements = TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](x, y, w, reduction="none", pos_weight=pw)
    return _reduce(elements, reduction, elements.numel()).to(target.dtype)


# ---------------------------------------------------------------------------------------------------


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Optional[Tensor] = None, weight: Optional[Tensor] = None,
                         reduction: str = "mean", ignore_index: Optional[int] = -100, label_smoothing: float = 0.0,
                         options=None, filter_eps: Union[None, str, float] = None,
                         filter_tolerance: Optional[float] = None, filter_weight_bound: str = "column",
                         loss_dtype: Optional[torch.dtype] = None) -> Tensor:
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
    """
    _check_reduction("linear_cross_entropy", reduction)
    # (other dtypes take the composite path, where nothing is filtered: any valid value will do)
    eps, tol = filter_settings(filter_eps, filter_tolerance, numpy_dtype(input.dtype) or numpy_dtype(torch.float32))
    weight_average = filter_weight_average(filter_weight_bound)
    if ignore_index is None:
        ignore_index = -100
    result_dtype = _check_loss_dtype(loss_dtype) or input.dtype
    cast = _autocast_dtype(input, linear_weight)
    if cast is not None:  # autocast runs the projection in its dtype and cross entropy in float32
        input, linear_weight = input.to(cast), linear_weight.to(cast)
        linear_bias = None if linear_bias is None else linear_bias.to(cast)
        result_dtype = loss_dtype or torch.float32
    args = (input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing)
    supported = _linear_cross_entropy_on_kernel(input, linear_weight, target, linear_bias, weight)
    path = route(supported, input.dtype, linear_cross_entropy=_LCE.multiply_adds(input, linear_weight))
    if path in (Path.TORCH, Path.COMPOSITE):
        return _linear_cross_entropy_composite(*_widened(args, result_dtype), options).to(result_dtype)
    rows = _LCE.flatten_rows(input)
    if path is Path.COMPILE:
        loss = _linear_cross_entropy_ops(rows, *args[1:], eps, tol, weight_average, result_dtype)
    else:
        class_weight = None if weight is None else weight.to(torch.float32)
        loss = _LCE.apply(rows, linear_weight, target.reshape(-1), linear_bias, class_weight, ignore_index,
                          label_smoothing, _ops.REDUCTION_CODES[reduction], eps, tol, weight_average)
    return (loss.view(target.shape) if reduction == "none" else loss).to(result_dtype)


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
    return (linear_weight.dim() == 2 and input.dim() >= 1 and _on_kernel_path(input, linear_weight, linear_bias)
            and _is_index_tensor(target) and input.dtype == linear_weight.dtype
            and (linear_bias is None or (linear_bias.dtype == input.dtype and linear_bias.dim() == 1))
            and input.shape[-1] == linear_weight.shape[-1] and tuple(target.shape) == tuple(input.shape[:-1])
            and not _needs_grad(weight))


def _linear_cross_entropy_ops(rows, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                              label_smoothing, eps, tol, weight_average, result_dtype):
    """Under torch.compile: the torch.ops.tilegrad ops (they have fake kernels)."""
    wants_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                                 for t in (rows, linear_weight, linear_bias))
    if wants_grad and reduction != "none":
        class_weight = None if weight is None else weight.to(torch.float32)
        loss, _, _, _ = torch.ops.tilegrad.linear_cross_entropy(rows, linear_weight, target.reshape(-1), linear_bias,
                                                               class_weight, ignore_index, label_smoothing,
                                                               _ops.REDUCTION_CODES[reduction], eps, tol,
                                                               weight_average)
        return loss
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
        loss = _linear_cross_entropy_composite(_LCE.flatten_rows(input), linear_weight, target.reshape(-1),
                                               linear_bias, weight, reduction, ignore_index, label_smoothing, options)
        return loss.view(target.shape) if reduction == "none" else loss
    return TORCH_FUNCTIONS["linear_cross_entropy"](input, linear_weight, target, linear_bias=linear_bias,
                                                   weight=weight, reduction=reduction, ignore_index=ignore_index,
                                                   label_smoothing=label_smoothing, options=options)
