"""tilegrad's operators registered with torch.library under the ``tilegrad`` namespace.

One op per aclnn operator (named and ordered like ``tilegrad/_<family>.py``), plus the forward ops
whose autograd formula runs a tilegrad backward (``silu``, ``embedding``,
``binary_cross_entropy_with_logits``, ``linear_cross_entropy``, ``linear_cross_entropy_rows``). Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace
through it, and the forward ops an autograd formula.

Ops are defined with ``torch.library.Library`` + ``impl`` rather than ``torch.library.custom_op``:
the same fake/autograd registration, at about half the per-call Python overhead (measured here:
~13 us against ~30 us over the raw kernel for a 1K-element SiLU backward).

Implementations hand tensors to the C++ core zero-copy (``_tensor.as_numpy``); outputs are
allocated by torch and written in place by the kernel wherever the core takes an ``out=``.
No output aliases an input.
"""

from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .. import _core
from .. import _fused_linear_cross_entropy as _flce
from . import _linear_cross_entropy as _LCE
from ._eager import recompute_grads
from ._tensor import as_numpy, from_numpy, new_output, optional_numpy
from ._threads import sync_threads

_LIB = torch.library.Library("tilegrad", "DEF")

REDUCTION_CODES = {"none": 0, "mean": 1, "sum": 2}


# Backends the kernels cannot run on: a clear TypeError instead of the dispatcher's NotImplementedError.
_UNSUPPORTED_BACKENDS = ("CUDA", "XPU", "MPS", "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA",
                         "MkldnnCPU", "QuantizedCPU")


def _unsupported_backend(name: str, backend: str):
    def reject(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)]
        found = ", ".join(sorted({f"{t.device} {t.layout}" for t in tensors}))
        raise TypeError(f"tilegrad::{name}: tensors must be dense (strided) CPU tensors, got {found} "
                        f"({backend}); the tilegrad.torch functions fall back to torch for these")
    return reject


def _define(schema: str, impl, fake, autograd=None) -> None:
    """Define ``tilegrad::<schema>`` with its CPU kernel, its fake kernel and (optionally) autograd."""
    name = schema.split("(", 1)[0]
    _LIB.define(schema)
    _LIB.impl(name, impl, "CPU")
    for backend in _UNSUPPORTED_BACKENDS:
        _LIB.impl(name, _unsupported_backend(name, backend), backend)
    torch.library.register_fake(f"tilegrad::{name}", fake, lib=_LIB)
    if autograd is not None:
        backward, setup_context = autograd
        torch.library.register_autograd(f"tilegrad::{name}", backward, setup_context=setup_context, lib=_LIB)


def _reduced_shape(reduction: str, rows: int) -> List[int]:
    """Shape of a loss: one value per row for "none", a scalar otherwise."""
    return [rows] if reduction == "none" else []


def _empty(like: Tensor) -> Tensor:
    """Placeholder (0 elements, ``like``'s dtype) for an output that was not asked for: ops cannot
    return None, and the fake kernels return the same."""
    return like.new_empty([0])


# ---------------------------------------------------------------------------------------------------
# SiLU (aclnnSiluBackward)


def _silu_backward_dtype(grad_output: Tensor, input: Tensor) -> torch.dtype:
    return input.dtype if grad_output.dtype == input.dtype else torch.float32


def _broadcast_shape(a: Tensor, b: Tensor) -> torch.Size:
    # torch.broadcast_shapes costs ~15 us a call; equal shapes (the common case) need none of it.
    return a.shape if a.shape == b.shape else torch.broadcast_shapes(a.shape, b.shape)


def _silu_backward_output(grad_output: Tensor, input: Tensor) -> Tensor:
    """The gradient's tensor: in the input's memory format (a channels_last input gets a channels_last
    gradient, as torch's; the kernel writes any strides) when the shapes match and the input is not
    contiguous; otherwise contiguous (large ones from the recycled pool). The fake kernel calls this too."""
    dtype = _silu_backward_dtype(grad_output, input)
    if grad_output.shape == input.shape and (not input.is_contiguous() or input.numel() < 1 << 20):
        # (~3 us cheaper per call than torch.empty(shape, dtype=...))
        return torch.empty_like(input, dtype=dtype)
    return new_output(_broadcast_shape(grad_output, input), dtype)


def _silu_backward_impl(grad_output: Tensor, input: Tensor) -> Tensor:
    sync_threads()
    out = _silu_backward_output(grad_output, input)
    _core.silu_backward(as_numpy(grad_output), as_numpy(input), as_numpy(out))
    return out


def _silu_backward_fake(grad_output: Tensor, input: Tensor) -> Tensor:
    if grad_output.shape == input.shape:
        return torch.empty_like(input, dtype=_silu_backward_dtype(grad_output, input))
    return input.new_empty(_broadcast_shape(grad_output, input), dtype=_silu_backward_dtype(grad_output, input))


_define("silu_backward(Tensor grad_output, Tensor input) -> Tensor", _silu_backward_impl, _silu_backward_fake)


def _silu_impl(input: Tensor) -> Tensor:
    return torch.ops.aten.silu.default(input)


def _silu_fake(input: Tensor) -> Tensor:
    return torch.empty_like(input)


def _silu_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])


def silu_grad_formula(ctx, grad: Tensor, kernel) -> Tensor:
    """The input gradient on both paths: ``kernel`` (the op, or the core directly), or with grad mode
    on (``create_graph=True``) recomputed through torch's differentiable silu, for second derivatives."""
    (input,) = ctx.saved_tensors
    if torch.is_grad_enabled():
        return recompute_grads(torch._C._nn.silu, (input,), (grad,))[0]
    return kernel(grad, input)


def _silu_grad(ctx, grad: Tensor):
    return silu_grad_formula(ctx, grad, torch.ops.tilegrad.silu_backward)


_define("silu(Tensor input) -> Tensor", _silu_impl, _silu_fake, (_silu_grad, _silu_setup))


# ---------------------------------------------------------------------------------------------------
# Cross entropy (aclnnCrossEntropyLoss, aclnnCrossEntropyLossGrad); input (N, C)


def _cross_entropy_loss_impl(input: Tensor, target: Tensor, weight: Optional[Tensor], reduction: str,
                             ignore_index: int, label_smoothing: float, z_loss_scale: float,
                             return_zloss: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    sync_threads()
    log_prob = new_output(input.shape, input.dtype)
    loss, _, zloss, lse = _core.cross_entropy_loss(as_numpy(input), as_numpy(target), optional_numpy(weight),
                                                   reduction, ignore_index, label_smoothing, z_loss_scale,
                                                   return_zloss, as_numpy(log_prob))
    if not return_zloss:
        return from_numpy(loss), log_prob, _empty(input), _empty(input)
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
    save_cross_entropy_context(ctx, target, weight, log_prob, lse,
                               (reduction, ignore_index, label_smoothing, z_loss_scale), return_zloss)


def save_cross_entropy_context(ctx, target: Tensor, weight: Optional[Tensor], log_prob: Tensor, lse: Tensor,
                               options: Tuple[str, int, float, float], return_zloss: bool) -> None:
    """What the backward needs: log_prob (and lse for the z-loss), target and weight; no input."""
    ctx.options = options
    # No zero-filled input-sized gradient for log_prob (measured: a fresh page-faulted buffer per backward).
    ctx.set_materialize_grads(False)
    ctx.has_zloss = return_zloss and options[3] != 0.0
    ctx.save_for_backward(log_prob, target, weight, lse if ctx.has_zloss else None)


SECOND_DERIVATIVE_ERROR = (
    "tilegrad.torch.cross_entropy: second derivatives (a backward with create_graph=True) are not supported "
    "on tilegrad's path, which saves log_prob instead of the logits; use torch.nn.functional.cross_entropy "
    "for this loss (or tilegrad.torch.disable() / unpatch())")


def cross_entropy_grad_formula(ctx, grad_loss: Tensor, grad_zloss: Optional[Tensor], kernel) -> Tensor:
    """The input gradient on both paths (``kernel``: the op, or the core directly). With grad mode on
    (``create_graph=True``) it refuses: the logits are not saved, so no exact second derivative exists."""
    if torch.is_grad_enabled():
        raise RuntimeError(SECOND_DERIVATIVE_ERROR)
    log_prob, target, weight, lse = ctx.saved_tensors
    reduction, ignore_index, label_smoothing, z_loss_scale = ctx.options
    # Grads are not materialized: a loss term that was not differentiated has a zero gradient.
    loss_shape = _reduced_shape(reduction, log_prob.shape[0])
    grad_loss = log_prob.new_zeros(loss_shape) if grad_loss is None else grad_loss
    grad_zloss = (log_prob.new_zeros(loss_shape) if grad_zloss is None else grad_zloss) if ctx.has_zloss else None
    return kernel(grad_loss, log_prob, target, weight, grad_zloss, lse, reduction, ignore_index, label_smoothing,
                  z_loss_scale if ctx.has_zloss else 0.0)


def _cross_entropy_loss_grad_formula(ctx, grad_loss, grad_log_prob, grad_zloss, grad_lse):
    grad_input = cross_entropy_grad_formula(ctx, grad_loss, grad_zloss, torch.ops.tilegrad.cross_entropy_loss_grad)
    return grad_input, None, None, None, None, None, None, None


_define("cross_entropy_loss(Tensor input, Tensor target, Tensor? weight, str reduction, int ignore_index, "
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


_define("cross_entropy_loss_grad(Tensor grad_loss, Tensor log_prob, Tensor target, Tensor? weight, "
        "Tensor? grad_zloss, Tensor? lse_for_zloss, str reduction, int ignore_index, float label_smoothing, "
        "float z_loss_scale) -> Tensor",
        _cross_entropy_loss_grad_impl, _cross_entropy_loss_grad_fake)


# ---------------------------------------------------------------------------------------------------
# Embedding (aclnnEmbeddingDenseBackward)


def _embedding_dense_backward_impl(grad_output: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                                   scale_grad_by_freq: bool) -> Tensor:
    sync_threads()
    out = new_output((num_weights, grad_output.shape[-1]), grad_output.dtype)
    _core.embedding_dense_backward(as_numpy(grad_output), as_numpy(indices), num_weights, padding_idx,
                                   scale_grad_by_freq, as_numpy(out))
    return out


def _embedding_dense_backward_fake(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    return grad_output.new_empty((num_weights, grad_output.shape[-1]))


_define("embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, int padding_idx, "
        "bool scale_grad_by_freq) -> Tensor",
        _embedding_dense_backward_impl, _embedding_dense_backward_fake)


def _embedding_impl(weight: Tensor, indices: Tensor, padding_idx: int, scale_grad_by_freq: bool) -> Tensor:
    return torch.ops.aten.embedding.default(weight, indices, padding_idx, scale_grad_by_freq, False)


def _embedding_fake(weight, indices, padding_idx, scale_grad_by_freq):
    return weight.new_empty((*indices.shape, weight.shape[1]))


def _embedding_setup(ctx, inputs, output) -> None:
    weight, indices, padding_idx, scale_grad_by_freq = inputs
    ctx.options = (weight.shape[0], padding_idx, scale_grad_by_freq)
    ctx.save_for_backward(indices)


def embedding_grad_formula(ctx, grad: Tensor, kernel) -> Tensor:
    """The weight gradient on both paths (``kernel``). With grad mode on (``create_graph=True``) it
    refuses: torch's differentiable formula did not match torch's own second derivative in the tests."""
    if torch.is_grad_enabled():
        raise RuntimeError("tilegrad.torch.embedding: second derivatives (a backward with create_graph=True) are "
                           "not supported; use torch.nn.functional.embedding for this layer")
    (indices,) = ctx.saved_tensors
    num_weights, padding_idx, scale_grad_by_freq = ctx.options
    return kernel(grad, indices, num_weights, padding_idx, scale_grad_by_freq)


def _embedding_grad(ctx, grad: Tensor):
    return embedding_grad_formula(ctx, grad, torch.ops.tilegrad.embedding_dense_backward), None, None, None


_define("embedding(Tensor weight, Tensor indices, int padding_idx, bool scale_grad_by_freq) -> Tensor",
        _embedding_impl, _embedding_fake, (_embedding_grad, _embedding_setup))


# ---------------------------------------------------------------------------------------------------
# Binary cross entropy with logits (aclnnBinaryCrossEntropyWithLogitsBackward); reduction as 0/1/2


def _bce_backward_impl(grad_output: Tensor, input: Tensor, target: Tensor, weight: Optional[Tensor],
                       pos_weight: Optional[Tensor], reduction: int) -> Tensor:
    sync_threads()
    out = new_output(input.shape, target.dtype)
    _core.binary_cross_entropy_with_logits_backward(as_numpy(grad_output), as_numpy(input), as_numpy(target),
                                                    optional_numpy(weight), optional_numpy(pos_weight), reduction,
                                                    as_numpy(out))
    return out


def _bce_backward_fake(grad_output, input, target, weight, pos_weight, reduction):
    return input.new_empty(input.shape, dtype=target.dtype)


_define("binary_cross_entropy_with_logits_backward(Tensor grad_output, Tensor input, Tensor target, "
        "Tensor? weight, Tensor? pos_weight, int reduction) -> Tensor",
        _bce_backward_impl, _bce_backward_fake)


def _bce_impl(input: Tensor, target: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
              reduction: int) -> Tensor:
    # contiguous, as the fake kernel says (aten's "none" result follows the inputs' strides)
    return torch.ops.aten.binary_cross_entropy_with_logits.default(input, target, weight, pos_weight,
                                                                   reduction).contiguous()


def _bce_fake(input, target, weight, pos_weight, reduction):
    return input.new_empty(input.shape if reduction == 0 else [])


def _bce_setup(ctx, inputs, output) -> None:
    input, target, weight, pos_weight, reduction = inputs
    ctx.reduction = reduction
    ctx.save_for_backward(input, target, weight, pos_weight)


def _bce_target_grad(grad: Tensor, input: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
                     reduction: int) -> Tensor:
    """d loss / d target = -w * (pw * log sigmoid(x) - log sigmoid(-x)), torch's own formula."""
    log_sig = torch.nn.functional.logsigmoid(input)
    log_sig_neg = torch.nn.functional.logsigmoid(-input)
    pos_term = log_sig if pos_weight is None else pos_weight * log_sig
    g = -(pos_term - log_sig_neg) * grad
    if weight is not None:
        g = g * weight
    if reduction == 1:
        g = g / max(1, input.numel())
    return g.expand(input.shape)


def bce_grad_formula(ctx, grad: Tensor, kernel) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """(input grad, target grad) on both paths: the input's from ``kernel``, the target's from torch's
    formula; with grad mode on (``create_graph=True``) both recomputed through torch's differentiable
    function (second derivatives)."""
    input, target, weight, pos_weight = ctx.saved_tensors
    reduction = ctx.reduction
    if torch.is_grad_enabled():
        if target.requires_grad:  # not verified against torch: refuse rather than risk a wrong number
            raise RuntimeError("tilegrad.torch.binary_cross_entropy_with_logits: second derivatives (a backward "
                               "with create_graph=True) with a target that requires grad are not supported; use "
                               "torch.nn.functional.binary_cross_entropy_with_logits for this loss")
        grad_input, grad_target = recompute_grads(
            lambda x, y: torch.ops.aten.binary_cross_entropy_with_logits(x, y, weight, pos_weight, reduction),
            (input, target), (grad,))
        return grad_input, grad_target
    grad_input = grad_target = None
    if ctx.needs_input_grad[0]:
        grad_input = kernel(grad, input, target, weight, pos_weight, reduction).to(input.dtype)
    if ctx.needs_input_grad[1]:
        grad_target = _bce_target_grad(grad, input, weight, pos_weight, reduction).to(target.dtype)
    return grad_input, grad_target


def _bce_grad(ctx, grad: Tensor):
    grads = bce_grad_formula(ctx, grad, torch.ops.tilegrad.binary_cross_entropy_with_logits_backward)
    return (*grads, None, None, None)


_define("binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight, Tensor? pos_weight, "
        "int reduction) -> Tensor", _bce_impl, _bce_fake, (_bce_grad, _bce_setup))


# ---------------------------------------------------------------------------------------------------
# Binary cross entropy with logits, fused forward (aclnnBinaryCrossEntropyWithLogits): the loss in one
# pass over the inputs (mean / sum reduced in a fixed order, no per-element temporaries); autograd as
# binary_cross_entropy_with_logits above (tilegrad's backward). The result is target's dtype, as
# torch's; for "none" contiguous whatever the inputs' strides, in the real and the fake kernel alike.


def _bce_fused_shape(input: Tensor, reduction: int) -> List[int]:
    return list(input.shape) if reduction == 0 else []


def _bce_fused_impl(input: Tensor, target: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
                    reduction: int) -> Tensor:
    sync_threads()
    out = new_output(_bce_fused_shape(input, reduction), target.dtype)
    _core.binary_cross_entropy_with_logits(as_numpy(input), as_numpy(target), optional_numpy(weight),
                                           optional_numpy(pos_weight), reduction, as_numpy(out))
    return out


def _bce_fused_fake(input, target, weight, pos_weight, reduction):
    return input.new_empty(_bce_fused_shape(input, reduction), dtype=target.dtype)


_define("binary_cross_entropy_with_logits_fused(Tensor input, Tensor target, Tensor? weight, Tensor? pos_weight, "
        "int reduction) -> Tensor", _bce_fused_impl, _bce_fused_fake, (_bce_grad, _bce_setup))


# ---------------------------------------------------------------------------------------------------
# Fused linear cross entropy: the vocabulary-parallel aclnn ops


def _online_max_sum_impl(input: Tensor, weight: Tensor, target: Tensor, vocab_start_index: int,
                         vocab_end_index: int, return_logits: bool) -> Tuple[Tensor, ...]:
    sync_threads()
    results = _core.fused_linear_online_max_sum(as_numpy(input), as_numpy(weight), as_numpy(target),
                                                vocab_start_index, vocab_end_index, return_logits)
    logits = results[5]
    return tuple(from_numpy(r) for r in results[:5]) + (_empty(input) if logits is None else from_numpy(logits),)


def _online_max_sum_fake(input, weight, target, vocab_start_index, vocab_end_index, return_logits):
    rows = input.shape[0]
    stat = input.new_empty([rows], dtype=torch.float32)
    logits = input.new_empty([rows, weight.shape[0]]) if return_logits else input.new_empty([0])
    return (stat, torch.empty_like(stat), torch.empty_like(stat),
            input.new_empty([(rows + 7) // 8], dtype=torch.uint8), target.new_empty([rows]), logits)


_define("fused_linear_online_max_sum(Tensor input, Tensor weight, Tensor target, int vocab_start_index, "
        "int vocab_end_index, bool return_logits) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
        _online_max_sum_impl, _online_max_sum_fake)


def _loss_with_max_sum_impl(logits_max: Tensor, sum_exp_logits: Tensor, predicted_logits: Tensor,
                            label_smoothing: float, logits: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    sync_threads()
    loss, softmax = _core.fused_cross_entropy_loss_with_max_sum(as_numpy(logits_max), as_numpy(sum_exp_logits),
                                                                as_numpy(predicted_logits), label_smoothing,
                                                                optional_numpy(logits))
    return from_numpy(loss), _empty(logits_max) if softmax is None else from_numpy(softmax)


def _loss_with_max_sum_fake(logits_max, sum_exp_logits, predicted_logits, label_smoothing, logits):
    softmax = logits_max.new_empty(logits.shape, dtype=torch.float32) if logits is not None else \
        logits_max.new_empty([0])
    return logits_max.new_empty(logits_max.shape, dtype=torch.float32), softmax


_define("fused_cross_entropy_loss_with_max_sum(Tensor logits_max, Tensor sum_exp_logits, Tensor predicted_logits, "
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


_define("fused_linear_cross_entropy_loss_grad(Tensor grad, Tensor input, Tensor weight, Tensor target_mask, "
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
                               filter_weight_average: bool = False) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    sync_threads()
    name = {1: "mean", 2: "sum"}[reduction]
    results = _flce.fused_linear_cross_entropy(as_numpy(input), as_numpy(weight), as_numpy(target), ignore_index,
                                               name, bias=optional_numpy(bias),
                                               class_weight=optional_numpy(class_weight),
                                               label_smoothing=label_smoothing,
                                               filter_eps=filter_eps if filter_eps > 0.0 else None,
                                               filter_tolerance=filter_tolerance if filter_tolerance > 0.0 else None,
                                               filter_weight_bound="average" if filter_weight_average else "column")
    loss, grad_input, grad_weight = (from_numpy(r) for r in results[:3])
    grad_bias = from_numpy(results[3]) if bias is not None else _empty(input)
    return loss, grad_input, grad_weight, grad_bias


def _linear_cross_entropy_fake(input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
                               filter_eps, filter_tolerance=0.0, filter_weight_average=False):
    grad_bias = bias.new_empty(bias.shape) if bias is not None else input.new_empty([0])
    return (input.new_empty([], dtype=torch.float32), input.new_empty(input.shape), weight.new_empty(weight.shape),
            grad_bias)


def _linear_cross_entropy_setup(ctx, inputs, output) -> None:
    input, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction = inputs[:8]
    _, grad_input, grad_weight, grad_bias = output
    ctx.has_bias = bias is not None
    ctx.options = (ignore_index, label_smoothing, {1: "mean", 2: "sum"}[reduction])
    ctx.mark_non_differentiable(grad_input, grad_weight, grad_bias)
    # the inputs (references) only for a backward under grad mode (second derivatives)
    ctx.save_for_backward(grad_input, grad_weight, grad_bias, input, weight, target, bias, class_weight)


def _linear_cross_entropy_grad(ctx, grad_loss, unused_grad_input, unused_grad_weight, unused_grad_bias):
    """The gradients were computed in the forward for an upstream gradient of 1: scale them (under
    grad mode: recomputed through the differentiable composite)."""
    saved = ctx.saved_tensors
    if torch.is_grad_enabled():
        gi, gw, gb = _LCE.composite_grads(grad_loss, *saved[3:], *ctx.options)
        return gi, gw, None, gb, None, None, None, None, None, None, None
    scale = grad_loss.to(torch.float32)
    scaled = [(g * scale).to(g.dtype) for g in saved[:3]]
    return scaled[0], scaled[1], None, scaled[2] if ctx.has_bias else None, None, None, None, None, None, None, None


_define("linear_cross_entropy(Tensor input, Tensor weight, Tensor target, Tensor? bias, Tensor? class_weight, "
        "int ignore_index, float label_smoothing, int reduction, float filter_eps, float filter_tolerance=0.0, "
        "bool filter_weight_average=False) "
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
        gi, gw, _ = _LCE.composite_grads(grad_loss, input, weight, target, None, None, ctx.ignore_index, 0.0, "none")
        return gi, gw, None, None
    kept = target != ctx.ignore_index
    grad_rows = torch.where(kept, grad_loss.to(torch.float32), 0.0)
    masked_target = torch.where(kept, target, 0)
    grad_input, grad_weight = torch.ops.tilegrad.fused_linear_cross_entropy_loss_grad(
        grad_rows, input, weight, ~kept, masked_target, 0.0, logits_max, sum_exp, None)
    return grad_input, grad_weight, None, None


_define("linear_cross_entropy_rows(Tensor input, Tensor weight, Tensor target, int ignore_index) "
        "-> (Tensor, Tensor, Tensor)", _linear_cross_entropy_rows_impl, _linear_cross_entropy_rows_fake,
        (_linear_cross_entropy_rows_grad, _linear_cross_entropy_rows_setup))
