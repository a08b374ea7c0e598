"""RMSNorm in PyTorch (``aclnnRmsNorm``, ``aclnnRmsNormGrad``; gamma over the trailing dims, rstd one
fp32 value per row): ``tilegrad.torch.rms_norm``, forward and backward on tilegrad.

- ``tilegrad::rms_norm`` (autograd on ``tilegrad::rms_norm_grad``): the ``torch.compile`` path.
- :class:`TilegradRmsNorm`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``, and second derivatives): torch's
  ``F.rms_norm`` on float32, the output rounded once.

Numerics: fp16 / bf16 are widened to fp32 and the output is rounded once; PyTorch's ``F.rms_norm``
and Hugging Face's RMSNorm round ``x * rstd`` to the input dtype before the weight multiply (two
roundings), so bf16 results differ from theirs by up to one bf16 ulp.
"""

from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, on_kernel_path, recompute_grads, rounded_once, route
from ._library import KernelFunction, OpKernel
from ._tensor import as_numpy, new_output, sync_threads

# ---------------------------------------------------------------------------------------------------
# The kernels, the composite, the ops and the eager node


def _rstd_shape(input: Tensor, gamma: Tensor) -> List[int]:
    """The vendor's rstd shape: x's leading dims, then ones for the normalized dims."""
    lead = input.dim() - gamma.dim()
    return list(input.shape[:lead]) + [1] * gamma.dim()


def _rms_norm_impl(input: Tensor, gamma: Tensor, eps: float, weight_offset: float = 0.0) -> Tuple[Tensor, Tensor]:
    sync_threads()
    y = new_output(input.shape, input.dtype)
    rstd = new_output(_rstd_shape(input, gamma), torch.float32)
    _core.rms_norm(as_numpy(input), as_numpy(gamma), eps, as_numpy(y), as_numpy(rstd), weight_offset)
    return y, rstd


def _rms_norm_fake(input, gamma, eps, weight_offset=0.0):
    return input.new_empty(input.shape), input.new_empty(_rstd_shape(input, gamma), dtype=torch.float32)


def _rms_norm_setup(ctx, inputs, output) -> None:
    input, gamma, eps, weight_offset = inputs
    ctx.eps = eps
    ctx.weight_offset = weight_offset
    ctx.save_for_backward(input, output[1], gamma)


def _rms_norm_composite(input: Tensor, gamma: Tensor, eps: float, weight_offset: float = 0.0) -> Tensor:
    """The kernels' numerics in torch ops (float32, the weight offset added in float32, output rounded
    once), differentiable."""
    return rounded_once(lambda x, g: TORCH_FUNCTIONS["rms_norm"](x, g.shape, g + weight_offset if weight_offset else g,
                                                                 eps), input.dtype, input, gamma)


def _rms_norm_backward(ctx, grad_y: Tensor, grad_kernel):
    """The gradient formula of both paths: the kernel (``grad_kernel``), or under grad mode the
    differentiable composite."""
    input, rstd, gamma = ctx.saved_tensors
    if torch.is_grad_enabled():
        dx, dgamma = recompute_grads(lambda x, g: _rms_norm_composite(x, g, ctx.eps, ctx.weight_offset),
                                     (input, gamma), (grad_y,))
        return dx, dgamma, None, None
    dx, dgamma = grad_kernel(grad_y, input, rstd, gamma, ctx.weight_offset)
    return dx, (dgamma.to(gamma.dtype) if ctx.needs_input_grad[1] else None), None, None


def _rms_norm_grad_impl(grad_y: Tensor, input: Tensor, rstd: Tensor, gamma: Tensor,
                        weight_offset: float = 0.0) -> Tuple[Tensor, Tensor]:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    dgamma = new_output(gamma.shape, torch.float32)
    _core.rms_norm_grad(as_numpy(grad_y), as_numpy(input), as_numpy(rstd), as_numpy(gamma), as_numpy(dx),
                        as_numpy(dgamma), weight_offset)
    return dx, dgamma


def _rms_norm_grad_fake(grad_y, input, rstd, gamma, weight_offset=0.0):
    return input.new_empty(input.shape), gamma.new_empty(gamma.shape, dtype=torch.float32)


_RMS_NORM = KernelFunction(
    OpKernel("rms_norm(Tensor input, Tensor gamma, float eps, float weight_offset=0.0) -> (Tensor, Tensor)",
             _rms_norm_impl, _rms_norm_fake),
    OpKernel("rms_norm_grad(Tensor grad_y, Tensor input, Tensor rstd, Tensor gamma, float weight_offset=0.0) "
             "-> (Tensor, Tensor)", _rms_norm_grad_impl, _rms_norm_grad_fake),
    node_name="TilegradRmsNorm", node_doc="The eager path: the kernels through ``tilegrad._core``, no op dispatch.",
    composite=_rms_norm_composite, setup=_rms_norm_setup, backward=_rms_norm_backward, returns=(0,))
TilegradRmsNorm = _RMS_NORM.node


# ---------------------------------------------------------------------------------------------------
# Public function


def rms_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
             eps: Optional[float] = None, *, weight_offset: float = 0.0) -> Tensor:
    """``F.rms_norm`` with the forward and backward on tilegrad (``aclnnRmsNorm`` / ``aclnnRmsNormGrad``).

    ``y = x / sqrt(mean(x^2 over normalized_shape) + eps) * weight``; ``eps=None`` is
    ``torch.finfo(input.dtype).eps``, as in torch. Backward saves only the input and the fp32 rstd
    (one float per row) and gives ``weight`` its gradient summed in a fixed order (the same for any
    thread count). fp16 / bf16: computed in fp32, rounded once (torch rounds twice). A negative
    ``eps``, which the vendor's kernel refuses, runs torch's ``F.rms_norm`` (its values, NaN where
    ``mean(x^2) + eps < 0``).

    ``weight_offset`` (keyword, tilegrad's; the vendor's ``aclnnGemmaRmsNorm`` for 1.0): the output is
    multiplied by ``weight + weight_offset``, added in float32: Gemma's RMSNorm ``x * rstd * (1 + w)``
    with ``weight_offset=1.0``, which computes in float32 and rounds once as Gemma's own module does.
    The gradient of ``weight`` is the same as without the offset. Needs ``weight``.
    """
    if not isinstance(weight_offset, (int, float)) or isinstance(weight_offset, bool):
        raise TypeError(f"tilegrad.torch.rms_norm: weight_offset must be a float, got {weight_offset!r}")
    if weight_offset and weight is None:
        raise ValueError(f"tilegrad.torch.rms_norm: weight_offset={weight_offset!r} needs a weight, got None")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    supported = (on_kernel_path(input, weight) and bool(shape) and tuple(input.shape[-len(shape):]) == shape
                 and input.numel() > 0 and (eps is None or eps >= 0)
                 and (weight is None or (tuple(weight.shape) == shape and _rms_norm_dtypes_ok(input, weight))))
    path = route(supported, input.dtype, rms_norm=input.numel())
    if path is Path.TORCH:
        if weight_offset:
            return _offset_rms_norm_torch(input, normalized_shape, weight, eps, float(weight_offset))
        return TORCH_FUNCTIONS["rms_norm"](input, normalized_shape, weight, eps)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    gamma = weight if weight is not None else input.new_ones(shape)
    return _RMS_NORM.run(path, input, gamma, float(eps), float(weight_offset))


def _offset_rms_norm_torch(input: Tensor, normalized_shape, weight: Tensor, eps: Optional[float],
                           weight_offset: float) -> Tensor:
    """torch's F.rms_norm with ``weight + weight_offset`` for what the kernels do not take, computed at
    least in float32 (Gemma's RMSNorm widens x and the weight, adds the offset, rounds once)."""
    wide = torch.promote_types(input.dtype, torch.float32)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    y = TORCH_FUNCTIONS["rms_norm"](input.to(wide), normalized_shape, weight.to(wide) + weight_offset, eps)
    return y.to(input.dtype)


def _rms_norm_dtypes_ok(input: Tensor, weight: Tensor) -> bool:
    """The vendor's (x, gamma) pairs: gamma of x's dtype, or fp32 gamma for fp16 / bf16 x."""
    return weight.dtype == input.dtype or weight.dtype == torch.float32
