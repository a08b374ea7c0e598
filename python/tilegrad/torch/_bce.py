"""Binary cross entropy with logits in PyTorch (``aclnnBinaryCrossEntropyWithLogits``,
``aclnnBinaryCrossEntropyWithLogitsBackward``): ``tilegrad.torch.binary_cross_entropy_with_logits``.
The ops take the reduction as its code (``_library.REDUCTION_CODES``).

- ``tilegrad::binary_cross_entropy_with_logits_fused`` (the fused forward; autograd on
  ``tilegrad::binary_cross_entropy_with_logits_backward``): the ``torch.compile`` path.
  ``tilegrad::binary_cross_entropy_with_logits`` is the same with torch's forward.
- :class:`TilegradBceWithLogits`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``): torch's function per element on
  float32 tensors, reduced in a fixed order, rounded once.

A target that requires grad gets torch's formula for its part.
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from .. import _core
from ._eager import (TORCH_FUNCTIONS, Path, check_reduction, legacy_reduction, on_kernel_path, recompute_grads,
                     reduced, requires_grad, route, widened)
from ._library import REDUCTION_CODES, REDUCTION_NAMES, KernelFunction, OpKernel, define
from ._tensor import as_numpy, new_output, optional_numpy, sync_threads

# ---------------------------------------------------------------------------------------------------
# The backward kernel, the forward with torch's loss


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


def _grad_formula(ctx, grad: Tensor, kernel) -> Tuple[Optional[Tensor], Optional[Tensor]]:
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


def _bce_backward(ctx, grad: Tensor, kernel):
    return (*_grad_formula(ctx, grad, kernel), None, None, None)


# ---------------------------------------------------------------------------------------------------
# Binary cross entropy with logits, fused forward (aclnnBinaryCrossEntropyWithLogits): the loss in one
# pass over the inputs (mean / sum reduced in a fixed order, no per-element temporaries); autograd on
# tilegrad's backward, shared with binary_cross_entropy_with_logits. The result is target's dtype, as
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


def _bce_composite(input: Tensor, target: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
                   reduction: int) -> Tensor:
    """The kernels' numerics in torch ops: torch's function per element on float32 tensors, reduced in
    a fixed order, the loss rounded once to the target's dtype (the kernel's result dtype);
    differentiable, gradients rounded once. ``reduction``: the ops' code."""
    x, y, w, pw = widened(input, target, weight, pos_weight)
    elements = TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](x, y, w, reduction="none", pos_weight=pw)
    return reduced(elements, REDUCTION_NAMES[reduction], elements.numel()).to(target.dtype)


_BCE = KernelFunction(
    OpKernel("binary_cross_entropy_with_logits_fused(Tensor input, Tensor target, Tensor? weight, Tensor? pos_weight, "
             "int reduction) -> Tensor", _bce_fused_impl, _bce_fused_fake),
    OpKernel("binary_cross_entropy_with_logits_backward(Tensor grad_output, Tensor input, Tensor target, "
             "Tensor? weight, Tensor? pos_weight, int reduction) -> Tensor", _bce_backward_impl, _bce_backward_fake),
    node_name="TilegradBceWithLogits",
    node_doc="``aclnnBinaryCrossEntropyWithLogits`` forward, ``aclnnBinaryCrossEntropyWithLogitsBackward`` for the "
             "input gradient (the target's, when it needs one, from torch's formula).",
    composite=_bce_composite, setup=_bce_setup, backward=_bce_backward)
TilegradBceWithLogits = _BCE.node
# The same op with torch's forward, and the fused op's autograd.
define("binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight, Tensor? pos_weight, "
       "int reduction) -> Tensor", _bce_impl, _bce_fake, _BCE.autograd)


# ---------------------------------------------------------------------------------------------------
# Public function


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                                     size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                                     reduction: str = "mean", pos_weight: Optional[Tensor] = None) -> Tensor:
    """``F.binary_cross_entropy_with_logits``; the loss runs tilegrad's fused
    ``aclnnBinaryCrossEntropyWithLogits`` and the input gradient its
    ``aclnnBinaryCrossEntropyWithLogitsBackward`` (one pass each, weight and pos_weight broadcast); a
    target that requires grad gets torch's formula for its part."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction("binary_cross_entropy_with_logits", reduction)
    supported = (on_kernel_path(input, target, weight, pos_weight) and input.shape == target.shape
                 and not requires_grad(weight) and not requires_grad(pos_weight))
    path = route(supported, input.dtype, binary_cross_entropy_with_logits=input.numel())
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["binary_cross_entropy_with_logits"](input, target, weight, reduction=reduction,
                                                                   pos_weight=pos_weight)
    return _BCE.run(path, input, target, weight, pos_weight, REDUCTION_CODES[reduction])
