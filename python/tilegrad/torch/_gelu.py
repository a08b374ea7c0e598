"""GELU and GeGLU in PyTorch (``aclnnGeluV2`` / ``aclnnGeluBackwardV2``, and tilegrad's ``gelu_mul``):
``tilegrad.torch.gelu`` (``F.gelu``), ``tilegrad.torch.gelu_mul`` (``F.gelu(gate, approximate=...) * up``:
GeGLU on two tensors, how a Gemma MLP combines its gate and up projections) and
``tilegrad.torch.geglu`` (the same on the two halves of one tensor), forward and backward on tilegrad.

- ``tilegrad::gelu`` / ``tilegrad::gelu_mul`` (autograd on ``tilegrad::gelu_backward`` /
  ``tilegrad::gelu_mul_backward``): the ``torch.compile`` path.
- :class:`TilegradGelu`, :class:`TilegradGeluMul`: the eager nodes, calling the core directly.
- The composites (below the crossover, under ``torch.func``, and second derivatives): the formula in
  torch ops on float32, the output rounded once.
"""

from typing import Tuple

import torch
from torch import Tensor

from .. import _core
from ._eager import Path, on_kernel_path, recompute_grads, rounded_once, route
from ._library import define
from ._tensor import as_numpy, new_output, sync_threads

_APPROXIMATIONS = ("none", "tanh")


def _torch_gelu(input: Tensor, approximate: str) -> Tensor:
    # torch's own gelu (F.gelu is this builtin), never a rerouted torch.nn.functional attribute
    return torch._C._nn.gelu(input, approximate=approximate)


def _check_approximate(op: str, approximate: str) -> None:
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"tilegrad.torch.{op}: approximate must be 'none' or 'tanh', got {approximate!r}")


# ---------------------------------------------------------------------------------------------------
# torch.library ops: gelu


def _gelu_impl(input: Tensor, approximate: str) -> Tensor:
    sync_threads()
    out = new_output(input.shape, input.dtype)
    _core.gelu(as_numpy(input), approximate, as_numpy(out))
    return out


def _gelu_fake(input, approximate):
    return input.new_empty(input.shape)


def _gelu_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.approximate = inputs[1]


def _gelu_composite(input: Tensor, approximate: str) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x: _torch_gelu(x, approximate), input.dtype, input)


def _gelu_backward(ctx, grad: Tensor, grad_kernel):
    (input,) = ctx.saved_tensors
    if torch.is_grad_enabled():
        return recompute_grads(lambda x: _gelu_composite(x, ctx.approximate), (input,), (grad,))[0], None
    return grad_kernel(grad, input, ctx.approximate), None


def _gelu_grad_formula(ctx, grad: Tensor):
    return _gelu_backward(ctx, grad, torch.ops.tilegrad.gelu_backward)


define("gelu(Tensor input, str approximate) -> Tensor", _gelu_impl, _gelu_fake, (_gelu_grad_formula, _gelu_setup))


def _gelu_backward_impl(grad: Tensor, input: Tensor, approximate: str) -> Tensor:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    _core.gelu_backward(as_numpy(grad), as_numpy(input), approximate, as_numpy(dx))
    return dx


def _gelu_backward_fake(grad, input, approximate):
    return input.new_empty(input.shape)


define("gelu_backward(Tensor grad, Tensor input, str approximate) -> Tensor", _gelu_backward_impl,
       _gelu_backward_fake)


# ---------------------------------------------------------------------------------------------------
# torch.library ops: gelu_mul


def _gelu_mul_impl(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    sync_threads()
    out = new_output(gate.shape, gate.dtype)
    _core.gelu_mul(as_numpy(gate), as_numpy(up), approximate, as_numpy(out))
    return out


def _gelu_mul_fake(gate, up, approximate):
    return gate.new_empty(gate.shape)


def _gelu_mul_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.approximate = inputs[2]


def _gelu_mul_torch(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    """The formula in torch ops, with torch's dtype promotion."""
    return _torch_gelu(gate, approximate) * up


def _gelu_mul_composite(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda g, u: _gelu_mul_torch(g, u, approximate), gate.dtype, gate, up)


def _gelu_mul_backward(ctx, grad: Tensor, grad_kernel):
    gate, up = ctx.saved_tensors
    if torch.is_grad_enabled():
        grads = recompute_grads(lambda g, u: _gelu_mul_composite(g, u, ctx.approximate), (gate, up), (grad,))
        return grads[0], grads[1], None
    d_gate, d_up = grad_kernel(grad, gate, up, ctx.approximate)
    return d_gate, d_up, None


def _gelu_mul_grad_formula(ctx, grad: Tensor):
    return _gelu_mul_backward(ctx, grad, torch.ops.tilegrad.gelu_mul_backward)


define("gelu_mul(Tensor gate, Tensor up, str approximate) -> Tensor", _gelu_mul_impl, _gelu_mul_fake,
       (_gelu_mul_grad_formula, _gelu_mul_setup))


def _gelu_mul_backward_impl(grad: Tensor, gate: Tensor, up: Tensor, approximate: str) -> Tuple[Tensor, Tensor]:
    sync_threads()
    d_gate, d_up = new_output(gate.shape, gate.dtype), new_output(up.shape, up.dtype)
    _core.gelu_mul_backward(as_numpy(grad), as_numpy(gate), as_numpy(up), approximate, as_numpy(d_gate),
                            as_numpy(d_up))
    return d_gate, d_up


def _gelu_mul_backward_fake(grad, gate, up, approximate):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


define("gelu_mul_backward(Tensor grad, Tensor gate, Tensor up, str approximate) -> (Tensor, Tensor)",
       _gelu_mul_backward_impl, _gelu_mul_backward_fake)


# ---------------------------------------------------------------------------------------------------
# Eager nodes and public functions


class TilegradGelu(torch.autograd.Function):
    """The eager path of gelu: ``aclnnGeluV2`` / ``aclnnGeluBackwardV2`` through ``tilegrad._core``."""

    @staticmethod
    def forward(ctx, input: Tensor, approximate: str) -> Tensor:
        _gelu_setup(ctx, (input, approximate), None)
        return _gelu_impl(input, approximate)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _gelu_backward(ctx, grad, _gelu_backward_impl)


class TilegradGeluMul(torch.autograd.Function):
    """The eager path of gelu_mul: tilegrad's two-tensor GeGLU kernels through ``tilegrad._core``."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor, approximate: str) -> Tensor:
        _gelu_mul_setup(ctx, (gate, up, approximate), None)
        return _gelu_mul_impl(gate, up, approximate)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _gelu_mul_backward(ctx, grad, _gelu_mul_backward_impl)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``F.gelu`` with the forward and backward on tilegrad (``aclnnGeluV2`` / ``aclnnGeluBackwardV2``).

    ``approximate="none"``: ``x * Phi(x)`` (erf); ``"tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))``. Backward saves only the input. fp16 / bf16: computed in fp32, rounded once (as torch's
    CPU kernel). What the kernels do not take (other devices or dtypes, tensor subclasses) runs
    torch's ``F.gelu``.
    """
    _check_approximate("gelu", approximate)
    path = route(on_kernel_path(input) and input.numel() > 0, input.dtype, gelu=input.numel())
    if path is Path.TORCH:
        return _torch_gelu(input, approximate)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.gelu(input, approximate)
    if path is Path.COMPOSITE:
        return _gelu_composite(input, approximate)
    return TilegradGelu.apply(input, approximate)


def gelu_mul(gate: Tensor, up: Tensor, approximate: str = "tanh") -> Tensor:
    """``F.gelu(gate, approximate=approximate) * up`` in one pass, and one backward pass giving both
    gradients (GeGLU on two tensors: how a Gemma MLP combines its gate and up projections, with
    ``approximate="tanh"``, transformers' ``gelu_pytorch_tanh``).

    Saves only ``gate`` and ``up`` for backward (the composite also saves ``gelu(gate)``). fp32
    arithmetic, each output rounded once. Shapes and dtypes must match, else torch's composite runs.
    """
    _check_approximate("gelu_mul", approximate)
    supported = gate.shape == up.shape and gate.dtype == up.dtype and on_kernel_path(gate, up) and gate.numel() > 0
    path = route(supported, gate.dtype, gelu_mul=gate.numel())
    if path is Path.TORCH:
        return _gelu_mul_torch(gate, up, approximate)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.gelu_mul(gate, up, approximate)
    if path is Path.COMPOSITE:
        return _gelu_mul_composite(gate, up, approximate)
    return TilegradGeluMul.apply(gate, up, approximate)


def geglu(input: Tensor, dim: int = -1, approximate: str = "tanh") -> Tensor:
    """GeGLU on one tensor: ``gate, up = input.chunk(2, dim); F.gelu(gate, approximate=...) * up`` (the
    first half activated, as :func:`tilegrad.torch.swiglu`; ``aclnnGeGluV3`` with ``activateLeft``).
    :func:`gelu_mul` on the two halves, which the kernels read in place. ``input.shape[dim]`` must be
    even."""
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"tilegrad.torch.geglu: dim must be in [{-input.dim()}, {input.dim() - 1}], got {dim}")
    if input.shape[dim] % 2:
        raise ValueError(f"tilegrad.torch.geglu: input.shape[{dim}] must be even, got {input.shape[dim]}")
    gate, up = input.chunk(2, dim)
    return gelu_mul(gate, up, approximate)
