"""``torch.nn.functional``-compatible functions whose backward runs on tilegrad's kernels.

Same signatures, defaults and results as torch's. Each function sends what tilegrad supports
(CPU dense float32 / float16 / bfloat16 tensors, class-index targets, ...) to the ``tilegrad::``
ops and everything else to torch's own function, so a call never gives a wrong result and never
copies a large tensor behind the caller's back.

=====================================  =======================================  ==============================
tilegrad.torch                         torch equivalent                         falls back to torch for
=====================================  =======================================  ==============================
``silu(input, inplace=False)``         ``F.silu``                               ``inplace=True``
``cross_entropy(...)``                 ``F.cross_entropy`` (+ z-loss)           probability targets
``embedding(...)``                     ``F.embedding``                          ``max_norm``, ``sparse=True``
``binary_cross_entropy_with_logits``   ``F.binary_cross_entropy_with_logits``   --
``linear_cross_entropy(...)``          ``F.linear_cross_entropy``               K-dim weights; with bias, class
                                                                                weight or smoothing: "none" and
                                                                                no-grad calls (computed as linear
                                                                                + tilegrad cross_entropy)
=====================================  =======================================  ==============================

Every function also falls back for tensors off the CPU, sparse tensors and other dtypes (e.g. float64).
"""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import functional as F

from . import _linear_cross_entropy as _LCE
from . import _ops  # noqa: F401  (registers torch.ops.tilegrad)
from .._fused_linear_cross_entropy import filter_settings, filter_weight_average
from ._autograd import TilegradBceWithLogits, TilegradCrossEntropy, TilegradEmbedding, TilegradSilu
from ._eager import below_crossover, on_kernel_path, transform_active
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

# Eager calls below these sizes take torch's own function (forward + backward through autograd is
# faster there: tilegrad's fixed cost is its autograd node and the hand-off to the core). Elements of
# the input (silu, BCE), of the output (embedding) or of the logits (cross entropy), per dtype;
# "cross_entropy_classes": logits with fewer classes than this (torch's kernel vectorises across
# rows, tilegrad's along a row). Measured with ``benchmarks/bench_torch.py --crossover``; the README
# lists them. torch.compile always takes the tilegrad ops (shapes may be symbolic there).
CROSSOVER = {
    "silu": {torch.float32: 1 << 20, torch.float16: 1 << 21, torch.bfloat16: 1 << 21},
    "cross_entropy": {torch.float32: 1 << 18, torch.float16: 1 << 18, torch.bfloat16: 1 << 18},
    "cross_entropy_classes": {torch.float32: 128, torch.float16: 128, torch.bfloat16: 128},
    "embedding": {torch.float32: 1 << 16, torch.float16: 1 << 17, torch.bfloat16: 1 << 17},
    "binary_cross_entropy_with_logits": {torch.float32: 1 << 14, torch.float16: 1 << 14, torch.bfloat16: 1 << 14},
}


def _torch_runs_it(op: str, size: int, dtype: torch.dtype) -> bool:
    """An eager call that torch's own function serves as well or faster: under a torch.func
    transform, or below the measured crossover."""
    return transform_active() or below_crossover(CROSSOVER, op, size, dtype)


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
    if inplace or not _on_kernel_path(input):
        return TORCH_FUNCTIONS["silu"](input, inplace=inplace)
    if torch.compiler.is_compiling():
        return torch.ops.tilegrad.silu(input)
    if not (input.requires_grad and torch.is_grad_enabled()) or _torch_runs_it("silu", input.numel(), input.dtype):
        return torch._C._nn.silu(input)  # the forward is torch's own either way
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
    if not (_on_kernel_path(input) and _is_index_tensor(target) and input.dim() >= 1 and not _needs_grad(weight)
            and (weight is None or unsupported_reason(weight, (torch.float32, torch.float16, torch.bfloat16,
                                                                torch.float64)) is None)):
        if wants_zloss:
            raise ValueError("cross_entropy: z_loss_scale / return_z_loss need tilegrad's path (CPU float32, "
                             f"float16 or bfloat16 logits and int64/int32 class targets), got input "
                             f"{input.dtype} on {input.device}, target {target.dtype}")
        return TORCH_FUNCTIONS["cross_entropy"](input, target, weight, ignore_index=ignore_index,
                                                reduction=reduction, label_smoothing=label_smoothing)
    weight32 = None if weight is None else weight.to(torch.float32)
    args = (weight32, reduction, ignore_index, label_smoothing, z_loss_scale, wants_zloss)
    if input.dim() <= 2:
        loss, zloss = _cross_entropy_2d(input, target, *args)
    else:
        loss, zloss = _cross_entropy_kdim(input, target, *args)
    return (loss, zloss) if return_z_loss else loss


def _cross_entropy_rows(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale, wants_zloss):
    """(N, C) logits, (N,) targets: the tilegrad op (compiling), the eager node, or torch's composite
    (torch.func transforms, below the crossover); ``(loss, zloss or None)``."""
    if torch.compiler.is_compiling():
        loss, _, zloss, _ = torch.ops.tilegrad.cross_entropy_loss(input, target, weight, reduction, ignore_index,
                                                                 label_smoothing, z_loss_scale, wants_zloss)
    elif (_torch_runs_it("cross_entropy", input.numel(), input.dtype)
          or below_crossover(CROSSOVER, "cross_entropy_classes", input.shape[1], input.dtype)):
        return _cross_entropy_composite(input, target, weight, reduction, ignore_index, label_smoothing,
                                        z_loss_scale, wants_zloss)
    else:
        loss, zloss = TilegradCrossEntropy.apply(input, target, weight, reduction, ignore_index, label_smoothing,
                                                 z_loss_scale, wants_zloss)
    return loss, (zloss if wants_zloss else None)


def _cross_entropy_composite(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                             wants_zloss):
    """torch's cross entropy plus the z-loss ``z_loss_scale * lse**2`` per kept row (reduced like the
    loss; "mean" over the kept rows), in torch ops: the same values as the kernel, differentiable."""
    loss = TORCH_FUNCTIONS["cross_entropy"](input, target, weight, ignore_index=ignore_index, reduction=reduction,
                                            label_smoothing=label_smoothing)
    if not wants_zloss:
        return loss, None
    kept = target != ignore_index
    lse = torch.logsumexp(input.float(), dim=1)
    zloss = torch.where(kept, z_loss_scale * lse.square(), 0.0)
    if reduction == "sum":
        zloss = zloss.sum()
    elif reduction == "mean":
        zloss = zloss.sum() / kept.sum()
    zloss = zloss.to(loss.dtype)
    return loss + zloss, zloss


def _cross_entropy_2d(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale, wants_zloss):
    """(N, C) or (C,) input: one tilegrad call."""
    single = input.dim() == 1
    if single:
        if target.dim() != 0:
            raise ValueError(f"cross_entropy: a (C,) input needs a 0-d target, got target shape {tuple(target.shape)}")
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    loss, zloss = _cross_entropy_rows(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
                                      wants_zloss)
    if single and reduction == "none":
        loss, zloss = loss.squeeze(0), (zloss.squeeze(0) if wants_zloss else zloss)
    return loss, zloss


def _cross_entropy_kdim(input, target, weight, reduction, ignore_index, label_smoothing, z_loss_scale,
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
        return TORCH_FUNCTIONS["cross_entropy"](input, target, weight, ignore_index=ignore_index, reduction=reduction,
                                                label_smoothing=label_smoothing), None
    rows = input.movedim(1, -1).reshape(-1, classes)
    loss, zloss = _cross_entropy_rows(rows, target.reshape(-1), weight, reduction, ignore_index, label_smoothing,
                                      z_loss_scale, wants_zloss)
    if reduction == "none":
        return loss.view(target.shape), (zloss.view(target.shape) if wants_zloss else None)
    return loss, zloss


# ---------------------------------------------------------------------------------------------------


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``F.embedding``; the weight gradient runs tilegrad's ``embedding_dense_backward``
    (``aclnnEmbeddingDenseBackward``: deterministic, float32 row sums). ``max_norm`` and
    ``sparse=True`` go to torch's ``F.embedding``."""
    if max_norm is not None or sparse or not _on_kernel_path(weight) or not _is_index_tensor(input) \
            or weight.dim() != 2 or input.dim() == 0:
        return TORCH_FUNCTIONS["embedding"](input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                                            sparse)
    num_weights = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        if padding_idx < -num_weights:
            raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num_weights}), "
                             f"got {padding_idx}")
        padding_idx += num_weights
    elif padding_idx >= num_weights:
        raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num_weights}), got {padding_idx}")
    if torch.compiler.is_compiling():
        return torch.ops.tilegrad.embedding(weight, input, padding_idx, scale_grad_by_freq)
    if not (weight.requires_grad and torch.is_grad_enabled()) or _torch_runs_it(
            "embedding", input.numel() * weight.shape[1], weight.dtype):
        return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, False)  # torch's forward either way
    return TilegradEmbedding.apply(weight, input, padding_idx, scale_grad_by_freq)


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
    if not _on_kernel_path(input, target, weight, pos_weight) or input.shape != target.shape \
            or _needs_grad(weight) or _needs_grad(pos_weight):
        return TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](input, target, weight, reduction=reduction,
                                                                   pos_weight=pos_weight)
    if torch.compiler.is_compiling():
        return torch.ops.tilegrad.binary_cross_entropy_with_logits_fused(input, target, weight, pos_weight,
                                                                         _ops.REDUCTION_CODES[reduction])
    if _torch_runs_it("binary_cross_entropy_with_logits", input.numel(), input.dtype):
        return TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](input, target, weight, reduction=reduction,
                                                                   pos_weight=pos_weight)
    return TilegradBceWithLogits.apply(input, target, weight, pos_weight, _ops.REDUCTION_CODES[reduction])


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
    ``F.cross_entropy``; under ``torch.func`` transforms, for tiny problems (below
    ``CROSSOVER_MACS`` multiply-adds, where torch is faster) and for what the kernels do not take
    (K-dimensional weights, float64, ...) torch's ``F.linear_cross_entropy`` runs, with ``options``
    (its chunking) passed on.

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
    if not _linear_cross_entropy_on_kernel(input, linear_weight, target, linear_bias, weight):
        return _linear_cross_entropy_composite(*_widened(args, result_dtype), options).to(result_dtype)
    rows = _LCE.flatten_rows(input)
    if torch.compiler.is_compiling():
        loss = _linear_cross_entropy_ops(rows, *args[1:], eps, tol, weight_average, result_dtype)
    elif _LCE.small_problem(rows.shape[0], rows.shape[1], linear_weight.shape[0]) or transform_active():
        return _linear_cross_entropy_composite(*_widened(args, result_dtype), options).to(result_dtype)
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
    op does not take, tiny problems and torch.func transforms. torch takes (N, H) / (H,) inputs only:
    (..., H) goes as rows; class weights in the logits' dtype, as torch's cross_entropy needs."""
    if weight is not None and weight.dtype != input.dtype and input.is_floating_point():
        weight = weight.to(input.dtype)
    if input.dim() > 2 and linear_weight.dim() == 2 and not target.is_floating_point():
        loss = _linear_cross_entropy_composite(_LCE.flatten_rows(input), linear_weight, target.reshape(-1),
                                               linear_bias, weight, reduction, ignore_index, label_smoothing, options)
        return loss.view(target.shape) if reduction == "none" else loss
    return TORCH_FUNCTIONS["linear_cross_entropy"](input, linear_weight, target, linear_bias=linear_bias,
                                                   weight=weight, reduction=reduction, ignore_index=ignore_index,
                                                   label_smoothing=label_smoothing, options=options)
