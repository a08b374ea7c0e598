"""The residual add fused into RMSNorm in PyTorch (``aclnnAddRmsNorm`` forward, tilegrad's fused backward:
RMSNormGrad with the residual stream's gradient added to dx in the same pass): ``tilegrad.torch.add_rms_norm``.

- ``tilegrad::add_rms_norm`` (autograd on ``tilegrad::add_rms_norm_backward``): the ``torch.compile`` path.
- :class:`TilegradAddRmsNorm`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``, and second derivatives): ``x1 + x2`` in
  the inputs' dtype (the sum rounded once, as the kernel stores it), then torch's ``F.rms_norm`` of
  that sum on float32, the output rounded once.

Numerics: the sum is rounded once into the inputs' dtype and normalised as stored, so ``y`` is
:func:`tilegrad.torch.rms_norm` of ``x_out`` bit for bit; fp16 / bf16 are widened to fp32 and ``y`` is
rounded once (Hugging Face's RMSNorm rounds ``x * rstd`` before the weight multiply: up to one ulp apart).
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, on_kernel_path, recompute_grads, rounded_once, route
from ._library import KernelFunction, OpKernel
from ._tensor import as_numpy, new_output, optional_numpy, sync_threads

_NAME = "tilegrad.torch.add_rms_norm"
_MAX_RANK = 8  # the vendor's rank limit of x1; higher ranks take torch's ops

# ---------------------------------------------------------------------------------------------------
# The kernels, the composite, the ops and the eager node


def _rstd_shape(x1: Tensor, gamma: Tensor) -> List[int]:
    """The vendor's rstd shape: x1's leading dims, then ones for the normalized dims."""
    lead = x1.dim() - gamma.dim()
    return list(x1.shape[:lead]) + [1] * gamma.dim()


def _add_rms_norm_impl(x1: Tensor, x2: Tensor, gamma: Tensor, eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    sync_threads()
    y = new_output(x1.shape, x1.dtype)
    rstd = new_output(_rstd_shape(x1, gamma), torch.float32)
    x_out = new_output(x1.shape, x1.dtype)
    _core.add_rms_norm(as_numpy(x1), as_numpy(x2), as_numpy(gamma), eps, as_numpy(y), as_numpy(rstd), as_numpy(x_out))
    return y, rstd, x_out


def _add_rms_norm_fake(x1, x2, gamma, eps):
    return (x1.new_empty(x1.shape), x1.new_empty(_rstd_shape(x1, gamma), dtype=torch.float32),
            x1.new_empty(x1.shape))


def _add_rms_norm_setup(ctx, inputs, output) -> None:
    """Saves the sum (both inputs' gradient is the sum's), the fp32 rstd and the weight."""
    ctx.eps = inputs[3]
    y, rstd, x_out = output
    ctx.save_for_backward(x_out, rstd, inputs[2])


def _norm_composite(x_out: Tensor, gamma: Tensor, eps: float) -> Tensor:
    """The kernels' normalisation of the stored sum in torch ops (float32, rounded once), differentiable."""
    return rounded_once(lambda x, g: TORCH_FUNCTIONS["rms_norm"](x, g.shape, g, eps), x_out.dtype, x_out, gamma)


def _add_rms_norm_composite(x1: Tensor, x2: Tensor, gamma: Tensor, eps: float) -> Tuple[Tensor, Tensor]:
    """``(y, x_out)`` with the kernels' numerics in torch ops, differentiable."""
    x_out = x1 + x2
    return _norm_composite(x_out, gamma, eps), x_out


def _input_grads(ctx, dx: Optional[Tensor], dgamma: Optional[Tensor]):
    """The sum's gradient to each input that wants one (x1, x2: the same), the weight's, none for eps."""
    needs = ctx.needs_input_grad
    return (dx if needs[0] else None, dx if needs[1] else None, dgamma if needs[2] else None, None)


def _add_rms_norm_backward(ctx, grad_y: Optional[Tensor], grad_x_out: Optional[Tensor], grad_kernel):
    """The gradient formula of both paths: the fused kernel (``grad_kernel``), or under grad mode the
    differentiable composite. ``grad_x_out``: the gradient reaching the sum by the residual path."""
    x_out, rstd, gamma = ctx.saved_tensors
    if grad_y is None:  # only the sum was used: its gradient passes through unchanged
        return _input_grads(ctx, grad_x_out, None)
    if torch.is_grad_enabled():
        dx, dgamma = recompute_grads(lambda x, g: _norm_composite(x, g, ctx.eps), (x_out, gamma), (grad_y,))
        if grad_x_out is not None:
            dx = grad_x_out if dx is None else dx + grad_x_out
        return _input_grads(ctx, dx, dgamma)
    dx, dgamma = grad_kernel(grad_y, x_out, rstd, gamma, grad_x_out)
    return _input_grads(ctx, dx, dgamma.to(gamma.dtype))


def _add_rms_norm_backward_impl(grad_y: Tensor, x_out: Tensor, rstd: Tensor, gamma: Tensor,
                                dresidual: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    sync_threads()
    dx = new_output(x_out.shape, x_out.dtype)
    dgamma = new_output(gamma.shape, torch.float32)
    _core.add_rms_norm_backward(as_numpy(grad_y), as_numpy(x_out), as_numpy(rstd), as_numpy(gamma),
                                optional_numpy(dresidual), as_numpy(dx), as_numpy(dgamma))
    return dx, dgamma


def _add_rms_norm_backward_fake(grad_y, x_out, rstd, gamma, dresidual):
    return x_out.new_empty(x_out.shape), gamma.new_empty(gamma.shape, dtype=torch.float32)


_ADD_RMS_NORM = KernelFunction(
    OpKernel("add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float eps) -> (Tensor, Tensor, Tensor)",
             _add_rms_norm_impl, _add_rms_norm_fake),
    OpKernel("add_rms_norm_backward(Tensor grad_y, Tensor x_out, Tensor rstd, Tensor gamma, Tensor? dresidual) "
             "-> (Tensor, Tensor)", _add_rms_norm_backward_impl, _add_rms_norm_backward_fake),
    node_name="TilegradAddRmsNorm", node_doc="The eager path: the kernels through ``tilegrad._core``, no op dispatch.",
    composite=_add_rms_norm_composite, setup=_add_rms_norm_setup, backward=_add_rms_norm_backward,
    returns=(0, 2), materialize_grads=False)  # an unused output's gradient stays None, not a tensor of zeros
TilegradAddRmsNorm = _ADD_RMS_NORM.node


# ---------------------------------------------------------------------------------------------------
# Public function


def add_rms_norm(x1: Tensor, x2: Tensor, weight: Tensor, eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    """The residual add and the RMSNorm after it in one pass (``aclnnAddRmsNorm``), with tilegrad's
    fused backward.

    Returns ``(y, x_out)``: ``x_out = x1 + x2`` (the new residual stream, in the inputs' dtype) and
    ``y = x_out / sqrt(mean(x_out^2 over weight's dims) + eps) * weight`` (the normalised input of the
    next sub-block). It replaces Hugging Face's decoder-layer pattern ::

        h = residual + x              # x_out
        y = norm(h)                   # y, with norm an RMSNorm of weight and eps
        residual = h

    by ``y, residual = tgt.add_rms_norm(residual, x, norm.weight, norm.variance_epsilon)``: the sum
    is written once and normalised while its row is in cache. The backward adds the residual path's
    gradient (that of ``x_out``) to the normalisation's in the same pass and gives that one gradient
    to both ``x1`` and ``x2``; it saves ``x_out``, the fp32 rstd (one float per row) and the weight.

    The sum is rounded once to the inputs' dtype and normalised as stored, so ``y`` equals
    ``tgt.rms_norm(x_out, weight.shape, weight, eps)`` bit for bit; fp16 / bf16 are computed in fp32
    with ``y`` rounded once (``F.rms_norm`` and Hugging Face round twice: up to one ulp apart).
    Tensors off the CPU, of other dtypes (float64), or of rank above 8 run torch's ``x1 + x2`` and
    ``F.rms_norm``.

    Args:
        x1: the residual stream.
        x2: what the block adds to it: ``x1``'s shape (no broadcasting, as the vendor's operator) and
            dtype.
        weight: the RMSNorm weight over ``x1``'s trailing dims (``weight.shape == x1.shape[-k:]``),
            ``x1``'s dtype.
        eps: added to the mean of squares, ``>= 0`` (default 1e-6, the vendor's).

    Raises:
        TypeError: a tensor argument that is not a tensor, or of another dtype than ``x1``.
        ValueError: ``x2`` shaped unlike ``x1``, ``weight`` not ``x1``'s trailing dims, ``eps`` negative
            or NaN.
    """
    _check_arguments(x1, x2, weight, eps)
    eps = float(eps)
    supported = on_kernel_path(x1, x2, weight) and x1.numel() > 0 and x1.dim() <= _MAX_RANK
    path = route(supported, x1.dtype, add_rms_norm=x1.numel())
    if path is Path.TORCH:
        x_out = x1 + x2
        return TORCH_FUNCTIONS["rms_norm"](x_out, weight.shape, weight, eps), x_out
    return _ADD_RMS_NORM.run(path, x1, x2, weight, eps)


def _check_arguments(x1, x2, weight, eps) -> None:
    """The vendor's rules, whatever the path: x2 is x1's shape and dtype, weight spans x1's trailing
    dims in x1's dtype, eps >= 0."""
    for name, t in (("x1", x1), ("x2", x2), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{_NAME}: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("x2", x2), ("weight", weight)):
        if t.dtype != x1.dtype:
            raise TypeError(f"{_NAME}: {name} dtype must be x1's ({x1.dtype}), got {t.dtype}")
    if x2.shape != x1.shape:
        raise ValueError(f"{_NAME}: x2 shape must equal x1 shape {list(x1.shape)} (no broadcasting), "
                         f"got {list(x2.shape)}")
    k = weight.dim()
    if not 1 <= k <= x1.dim() or weight.shape != x1.shape[x1.dim() - k:]:
        raise ValueError(f"{_NAME}: weight shape must be trailing dims of x1 shape {list(x1.shape)}, "
                         f"got {list(weight.shape)}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError(f"{_NAME}: eps must be a float, got {type(eps).__name__}")
    if not eps >= 0:  # NaN too
        raise ValueError(f"{_NAME}: eps must be >= 0, got {eps}")
