"""LayerNorm in PyTorch (``aclnnLayerNorm``, ``aclnnLayerNormBackward``; weight and bias optional, mean
and rstd one fp32 value per row): ``tilegrad.torch.layer_norm``, forward and backward on tilegrad.

- ``tilegrad::layer_norm`` (autograd on ``tilegrad::layer_norm_backward``): the ``torch.compile`` path.
- :class:`TilegradLayerNorm`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``, and second derivatives): torch's
  ``F.layer_norm`` on float32, the output rounded once.

Numerics: fp16 / bf16 are widened to fp32 and the output is rounded once, as torch's CPU kernel does;
the weight and bias gradients are summed in a fixed order (the same bits for any thread count).
"""

import math
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, on_kernel_path, recompute_grads, rounded_once, route
from ._library import KernelFunction, OpKernel, placeholder
from ._tensor import as_numpy, new_output, optional_numpy, sync_threads

# ---------------------------------------------------------------------------------------------------
# The kernels, the composite, the ops and the eager node


def _stats_shape(input: Tensor, normalized_shape: Sequence[int]) -> List[int]:
    """The vendor's (and torch's) mean / rstd shape: input's leading dims, then ones."""
    lead = input.dim() - len(normalized_shape)
    return list(input.shape[:lead]) + [1] * len(normalized_shape)


def _layer_norm_impl(input: Tensor, normalized_shape: List[int], weight: Optional[Tensor], bias: Optional[Tensor],
                     eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    sync_threads()
    out = new_output(input.shape, input.dtype)
    stats = _stats_shape(input, normalized_shape)
    mean, rstd = new_output(stats, torch.float32), new_output(stats, torch.float32)
    _core.layer_norm(as_numpy(input), list(normalized_shape), optional_numpy(weight), optional_numpy(bias), eps,
                     as_numpy(out), as_numpy(mean), as_numpy(rstd))
    return out, mean, rstd


def _layer_norm_fake(input, normalized_shape, weight, bias, eps):
    stats = _stats_shape(input, normalized_shape)
    return (input.new_empty(input.shape), input.new_empty(stats, dtype=torch.float32),
            input.new_empty(stats, dtype=torch.float32))


def _layer_norm_setup(ctx, inputs, output) -> None:
    input, normalized_shape, weight, bias, eps = inputs
    ctx.normalized_shape = list(normalized_shape)
    ctx.eps = eps
    ctx.has_bias = bias is not None
    ctx.save_for_backward(input, output[1], output[2], weight, bias)


def _layer_norm_composite(input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor],
                          bias: Optional[Tensor], eps: float) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x, w, b: TORCH_FUNCTIONS["layer_norm"](x, normalized_shape, w, b, eps), input.dtype,
                        input, weight, bias)


def _layer_norm_backward(ctx, grad_out: Tensor, grad_kernel):
    """The gradient formula of both paths: the kernel (``grad_kernel``), or under grad mode the
    differentiable composite. Returns the gradients of the op's arguments (input, normalized_shape,
    weight, bias, eps)."""
    input, mean, rstd, weight, bias = ctx.saved_tensors
    if torch.is_grad_enabled():
        dx, dw, db = recompute_grads(
            lambda x, w, b: _layer_norm_composite(x, ctx.normalized_shape, w, b, ctx.eps), (input, weight, bias),
            (grad_out,))
        return dx, None, dw, db, None
    needs = ctx.needs_input_grad
    mask = [needs[0], weight is not None and needs[2], bias is not None and needs[3]]
    if not any(mask):
        return None, None, None, None, None
    dx, dw, db = grad_kernel(grad_out, input, ctx.normalized_shape, mean, rstd, weight, mask)
    return (dx if mask[0] else None, None, dw.to(weight.dtype) if mask[1] else None,
            db.to(bias.dtype) if mask[2] else None, None)


def _layer_norm_backward_impl(grad_out: Tensor, input: Tensor, normalized_shape: List[int], mean: Tensor,
                              rstd: Tensor, weight: Optional[Tensor],
                              output_mask: List[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    sync_threads()
    dx = new_output(input.shape, input.dtype) if output_mask[0] else placeholder(input)
    dw = new_output(normalized_shape, torch.float32) if output_mask[1] else placeholder(mean)
    db = new_output(normalized_shape, torch.float32) if output_mask[2] else placeholder(mean)
    _core.layer_norm_backward(as_numpy(grad_out), as_numpy(input), list(normalized_shape), as_numpy(mean),
                              as_numpy(rstd), optional_numpy(weight), None, list(output_mask),
                              as_numpy(dx) if output_mask[0] else None, as_numpy(dw) if output_mask[1] else None,
                              as_numpy(db) if output_mask[2] else None)
    return dx, dw, db


def _layer_norm_backward_fake(grad_out, input, normalized_shape, mean, rstd, weight, output_mask):
    return (input.new_empty(input.shape) if output_mask[0] else placeholder(input),
            mean.new_empty(normalized_shape) if output_mask[1] else placeholder(mean),
            mean.new_empty(normalized_shape) if output_mask[2] else placeholder(mean))


_LAYER_NORM = KernelFunction(
    OpKernel("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
             "-> (Tensor, Tensor, Tensor)", _layer_norm_impl, _layer_norm_fake),
    OpKernel("layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
             "Tensor? weight, bool[] output_mask) -> (Tensor, Tensor, Tensor)",
             _layer_norm_backward_impl, _layer_norm_backward_fake),
    node_name="TilegradLayerNorm", node_doc="The eager path: the kernels through ``tilegrad._core``, no op dispatch.",
    composite=_layer_norm_composite, setup=_layer_norm_setup, backward=_layer_norm_backward, returns=(0,))
TilegradLayerNorm = _LAYER_NORM.node


# ---------------------------------------------------------------------------------------------------
# Public function


def layer_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """``F.layer_norm`` with the forward and backward on tilegrad (``aclnnLayerNorm`` /
    ``aclnnLayerNormBackward``).

    ``out = (x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape`` dims
    (biased variance). Backward saves the input and the fp32 mean and rstd (one float each per row) and
    gives ``weight`` and ``bias`` their gradients summed in a fixed order (the same for any thread
    count). fp16 / bf16: computed in fp32, rounded once. What the kernels do not take (other devices or
    dtypes, a weight or bias of another dtype than the input's or float32, a negative ``eps``, empty
    tensors) runs torch's ``F.layer_norm``.
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    supported = (on_kernel_path(input, weight, bias) and 1 <= len(shape) <= input.dim() <= 8
                 and tuple(input.shape[-len(shape):]) == shape and input.numel() > 0
                 and isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0
                 and _params_ok(input, shape, weight, bias))
    path = route(supported, input.dtype, layer_norm=input.numel())
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["layer_norm"](input, normalized_shape, weight, bias, eps)
    return _LAYER_NORM.run(path, input, list(shape), weight, bias, float(eps))


def _params_ok(input: Tensor, shape: tuple, weight: Optional[Tensor], bias: Optional[Tensor]) -> bool:
    """The vendor's rules: weight and bias of normalized_shape, input's dtype or float32, one dtype."""
    given = [t for t in (weight, bias) if t is not None]
    return (all(tuple(t.shape) == shape and t.dtype in (input.dtype, torch.float32) for t in given)
            and len({t.dtype for t in given}) <= 1)
