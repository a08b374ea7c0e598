"""``torch.nn`` modules whose backward runs on tilegrad: same constructor arguments, parameters and
``state_dict`` as torch's (each is a subclass of the torch module it replaces), so a model switches by
swapping classes (``tilegrad.torch.patch`` does it in place).

Under ``torch.jit.script`` the modules run torch's own functions (TorchScript cannot compile
tilegrad's Python dispatch; ``@torch.jit.unused`` keeps it out), so a model that scripted before
``patch()`` still scripts after it, with torch's numbers; ``CrossEntropyLoss`` with a z-loss, which
torch's function has not, refuses when scripted."""

from typing import Optional

import torch
from torch import Tensor
from torch.nn import functional as F

from ._gelu import gelu
from ._layer_norm import layer_norm
from ._linear import linear
from . import functional as TF
from ._rms_norm import rms_norm

__all__ = ["SiLU", "GELU", "CrossEntropyLoss", "Embedding", "BCEWithLogitsLoss", "LinearCrossEntropyLoss", "RMSNorm", "LayerNorm",
           "Linear"]


class SiLU(torch.nn.SiLU):
    """``torch.nn.SiLU`` with tilegrad's SiLU backward."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.silu(input, inplace=self.inplace)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return TF.silu(input, inplace=self.inplace)


class GELU(torch.nn.GELU):
    """``torch.nn.GELU`` (same ``approximate`` argument) on tilegrad's GELU forward and backward
    (:func:`tilegrad.torch.gelu`)."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.gelu(input, approximate=self.approximate)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return gelu(input, self.approximate)


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """``torch.nn.CrossEntropyLoss`` on tilegrad's cross entropy, plus an optional z-loss
    (``z_loss_scale * lse**2`` per kept row, added to the loss)."""

    def __init__(self, weight: Optional[Tensor] = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0, *, z_loss_scale: float = 0.0) -> None:
        super().__init__(weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        if z_loss_scale < 0:
            raise ValueError(f"CrossEntropyLoss: z_loss_scale must be >= 0, got {z_loss_scale}")
        self.z_loss_scale = float(z_loss_scale)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            if self.z_loss_scale != 0.0:
                raise RuntimeError("tilegrad.torch.nn.CrossEntropyLoss: under torch.jit.script torch's "
                                   "cross_entropy runs, which has no z-loss (z_loss_scale != 0)")
            return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                                   reduction=self.reduction, label_smoothing=self.label_smoothing)
        return self._tilegrad(input, target)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor, target: Tensor) -> Tensor:
        return TF.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction,
                                label_smoothing=self.label_smoothing, z_loss_scale=self.z_loss_scale)

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction}, " \
               f"label_smoothing={self.label_smoothing}, z_loss_scale={self.z_loss_scale}"


class Embedding(torch.nn.Embedding):
    """``torch.nn.Embedding`` (same parameters and state_dict) with tilegrad's deterministic
    embedding dense backward."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.sparse)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return TF.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                            self.scale_grad_by_freq, self.sparse)


class BCEWithLogitsLoss(torch.nn.BCEWithLogitsLoss):
    """``torch.nn.BCEWithLogitsLoss`` with tilegrad's one-pass input gradient."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                      pos_weight=self.pos_weight)
        return self._tilegrad(input, target)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor, target: Tensor) -> Tensor:
        return TF.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                   pos_weight=self.pos_weight)


class LinearCrossEntropyLoss(torch.nn.LinearCrossEntropyLoss):
    """``torch.nn.LinearCrossEntropyLoss`` (owns the ``linear`` projection, same constructor and
    state_dict) on tilegrad's fused linear cross entropy: the logits never exist whole. Where the
    call falls back to torch (float64, K-dimensional ``out_features``, ...), the module's ``options``
    (torch's chunking) go with it.

    ``filter_eps`` (attribute, default None = exact; e.g. ``loss_fn.filter_eps = "auto"``): gradient
    filtering, see :func:`tilegrad.torch.linear_cross_entropy`."""

    filter_eps = None

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        linear_weight = self.linear.weight
        linear_bias = self.linear.bias
        if self.out_features:
            linear_weight = linear_weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
            linear_bias = None if linear_bias is None else linear_bias.reshape((self.num_classes, *self.out_features))
        return TF.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=self.weight,
                                       reduction=self.reduction, ignore_index=self.ignore_index,
                                       label_smoothing=self.label_smoothing, options=getattr(self, "options", None),
                                       filter_eps=self.filter_eps)


class RMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` (same constructor, parameters and state_dict) on tilegrad's RMSNorm forward
    and backward (:func:`tilegrad.torch.rms_norm`)."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)


class LayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` (same constructor, parameters and state_dict) on tilegrad's LayerNorm
    forward and backward (:func:`tilegrad.torch.layer_norm`)."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` on :func:`tilegrad.torch.linear` (float32: oneDNN GEMMs whose results do not
    depend on the thread count; 16-bit and autocast: torch's own ``F.linear``)."""

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():
            return F.linear(input, self.weight, self.bias)
        return self._tilegrad(input)

    @torch.jit.unused
    def _tilegrad(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)
