"""The eager path of silu, cross_entropy, embedding and binary_cross_entropy_with_logits: lean
``torch.autograd.Function`` nodes whose forward and backward call the C++ core directly.

The ``torch.ops.tilegrad`` ops of ``_ops`` run the same kernels, but every call through
``torch.library`` dispatch (and its autograd wrapper) costs tens of microseconds; these nodes are
what an eager call goes through (see ``_eager``). Both share the gradient formulas of ``_ops``,
including their second-derivative behaviour under ``create_graph=True``.
"""

from typing import Optional

import torch
from torch import Tensor

from . import _ops


class TilegradSilu(torch.autograd.Function):
    """Forward: torch's ``silu``; backward: ``aclnnSiluBackward`` (in the input's memory format)."""

    @staticmethod
    def forward(ctx, input: Tensor) -> Tensor:
        ctx.save_for_backward(input)
        return torch._C._nn.silu(input)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return _ops.silu_grad_formula(ctx, grad, _ops._silu_backward_impl)


class TilegradCrossEntropy(torch.autograd.Function):
    """``aclnnCrossEntropyLoss`` forward, ``aclnnCrossEntropyLossGrad`` backward; (N, C) logits.
    Returns ``(loss, zloss)``, ``zloss`` a 0-element placeholder without a z-loss."""

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, weight: Optional[Tensor], reduction: str, ignore_index: int,
                label_smoothing: float, z_loss_scale: float, return_zloss: bool):
        loss, log_prob, zloss, lse = _ops._cross_entropy_loss_impl(input, target, weight, reduction, ignore_index,
                                                                   label_smoothing, z_loss_scale, return_zloss)
        _ops.save_cross_entropy_context(ctx, target, weight, log_prob, lse,
                                        (reduction, ignore_index, label_smoothing, z_loss_scale), return_zloss)
        return loss, zloss

    @staticmethod
    def backward(ctx, grad_loss: Tensor, grad_zloss: Tensor):
        grad_input = _ops.cross_entropy_grad_formula(ctx, grad_loss, grad_zloss, _ops._cross_entropy_loss_grad_impl)
        return grad_input, None, None, None, None, None, None, None


class TilegradEmbedding(torch.autograd.Function):
    """Forward: torch's ``embedding``; weight gradient: ``aclnnEmbeddingDenseBackward``."""

    @staticmethod
    def forward(ctx, weight: Tensor, indices: Tensor, padding_idx: int, scale_grad_by_freq: bool) -> Tensor:
        ctx.options = (weight.shape[0], padding_idx, scale_grad_by_freq)
        ctx.save_for_backward(indices)
        return torch.embedding(weight, indices, padding_idx, scale_grad_by_freq, False)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _ops.embedding_grad_formula(ctx, grad, _ops._embedding_dense_backward_impl), None, None, None


class TilegradBceWithLogits(torch.autograd.Function):
    """``aclnnBinaryCrossEntropyWithLogits`` forward, ``aclnnBinaryCrossEntropyWithLogitsBackward`` for the
    input gradient (the target's, when it needs one, from torch's formula)."""

    @staticmethod
    def forward(ctx, input: Tensor, target: Tensor, weight: Optional[Tensor], pos_weight: Optional[Tensor],
                reduction: int) -> Tensor:
        ctx.reduction = reduction
        ctx.save_for_backward(input, target, weight, pos_weight)
        return _ops._bce_fused_impl(input, target, weight, pos_weight, reduction)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return (*_ops.bce_grad_formula(ctx, grad, _ops._bce_backward_impl), None, None, None)
