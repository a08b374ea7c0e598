"""SwiGLU in PyTorch (``aclnnSwiGlu``, ``aclnnSwiGluGrad``): ``tilegrad.torch.swiglu`` on one tensor
(``a, b = input.chunk(2, dim); F.silu(a) * b``) and ``tilegrad.torch.silu_mul`` (``F.silu(gate) * up``:
the same formula on two tensors, how a Llama MLP combines its gate and up projections), forward and
backward on tilegrad.

- ``tilegrad::swi_glu`` / ``tilegrad::silu_mul`` (autograd on ``tilegrad::swi_glu_grad`` /
  ``tilegrad::silu_mul_grad``): the ``torch.compile`` path.
- :class:`TilegradSwiGlu`, :class:`TilegradSiluMul`: the eager nodes, calling the core directly.
- The composites (below the crossover, under ``torch.func``, and second derivatives): the formula
  in torch ops on float32, the output rounded once.
"""

from typing import List, Tuple

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, on_kernel_path, recompute_grads, rounded_once, route
from ._library import define
from ._tensor import as_numpy, new_output, sync_threads

# ---------------------------------------------------------------------------------------------------
# torch.library ops


def _swi_glu_shape(input: Tensor, dim: int) -> List[int]:
    shape = list(input.shape)
    shape[dim] //= 2
    return shape


def _swi_glu_impl(input: Tensor, dim: int) -> Tensor:
    sync_threads()
    out = new_output(_swi_glu_shape(input, dim), input.dtype)
    _core.swi_glu(as_numpy(input), dim, as_numpy(out))
    return out


def _swi_glu_fake(input, dim):
    return input.new_empty(_swi_glu_shape(input, dim))


def _swi_glu_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.dim = inputs[1]


def _swi_glu_torch(input: Tensor, dim: int) -> Tensor:
    """The formula in torch ops, in the input's dtype."""
    a, b = input.chunk(2, dim)
    return TORCH_FUNCTIONS["silu"](a) * b


def _swi_glu_composite(input: Tensor, dim: int) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x: _swi_glu_torch(x, dim), input.dtype, input)


def _swi_glu_backward(ctx, grad: Tensor, grad_kernel):
    (input,) = ctx.saved_tensors
    if torch.is_grad_enabled():
        return recompute_grads(lambda x: _swi_glu_composite(x, ctx.dim), (input,), (grad,))[0], None
    return grad_kernel(grad, input, ctx.dim), None


def _swi_glu_grad_formula(ctx, grad: Tensor):
    return _swi_glu_backward(ctx, grad, torch.ops.tilegrad.swi_glu_grad)


define("swi_glu(Tensor input, int dim) -> Tensor", _swi_glu_impl, _swi_glu_fake,
       (_swi_glu_grad_formula, _swi_glu_setup))


def _swi_glu_grad_impl(grad: Tensor, input: Tensor, dim: int) -> Tensor:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    _core.swi_glu_grad(as_numpy(grad), as_numpy(input), dim, as_numpy(dx))
    return dx


def _swi_glu_grad_fake(grad, input, dim):
    return input.new_empty(input.shape)


define("swi_glu_grad(Tensor grad, Tensor input, int dim) -> Tensor", _swi_glu_grad_impl, _swi_glu_grad_fake)


def _silu_mul_impl(gate: Tensor, up: Tensor) -> Tensor:
    sync_threads()
    out = new_output(gate.shape, gate.dtype)
    _core.silu_mul(as_numpy(gate), as_numpy(up), as_numpy(out))
    return out


def _silu_mul_fake(gate, up):
    return gate.new_empty(gate.shape)


def _silu_mul_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _silu_mul_torch(gate: Tensor, up: Tensor) -> Tensor:
    """The formula in torch ops, with torch's dtype promotion."""
    return TORCH_FUNCTIONS["silu"](gate) * up


def _silu_mul_composite(gate: Tensor, up: Tensor) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(_silu_mul_torch, gate.dtype, gate, up)


def _silu_mul_backward(ctx, grad: Tensor, grad_kernel):
    gate, up = ctx.saved_tensors
    if torch.is_grad_enabled():
        return tuple(recompute_grads(_silu_mul_composite, (gate, up), (grad,)))
    return tuple(grad_kernel(grad, gate, up))


def _silu_mul_grad_formula(ctx, grad: Tensor):
    return _silu_mul_backward(ctx, grad, torch.ops.tilegrad.silu_mul_grad)


define("silu_mul(Tensor gate, Tensor up) -> Tensor", _silu_mul_impl, _silu_mul_fake,
       (_silu_mul_grad_formula, _silu_mul_setup))


def _silu_mul_grad_impl(grad: Tensor, gate: Tensor, up: Tensor) -> Tuple[Tensor, Tensor]:
    sync_threads()
    d_gate, d_up = new_output(gate.shape, gate.dtype), new_output(up.shape, up.dtype)
    _core.silu_mul_grad(as_numpy(grad), as_numpy(gate), as_numpy(up), as_numpy(d_gate), as_numpy(d_up))
    return d_gate, d_up


def _silu_mul_grad_fake(grad, gate, up):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


define("silu_mul_grad(Tensor grad, Tensor gate, Tensor up) -> (Tensor, Tensor)", _silu_mul_grad_impl,
       _silu_mul_grad_fake)


# ---------------------------------------------------------------------------------------------------
# Eager node and public function


class TilegradSiluMul(torch.autograd.Function):
    """The eager path of silu_mul: the SwiGLU kernels on two tensors through ``tilegrad._core``."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor) -> Tensor:
        _silu_mul_setup(ctx, (gate, up), None)
        return _silu_mul_impl(gate, up)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _silu_mul_backward(ctx, grad, _silu_mul_grad_impl)


class TilegradSwiGlu(torch.autograd.Function):
    """The eager path of swiglu: ``aclnnSwiGlu`` / ``aclnnSwiGluGrad`` through ``tilegrad._core``."""

    @staticmethod
    def forward(ctx, input: Tensor, dim: int) -> Tensor:
        _swi_glu_setup(ctx, (input, dim), None)
        return _swi_glu_impl(input, dim)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _swi_glu_backward(ctx, grad, _swi_glu_grad_impl)


def silu_mul(gate: Tensor, up: Tensor) -> Tensor:
    """``F.silu(gate) * up`` in one pass, and one backward pass giving both gradients.

    How a Llama MLP combines its separate gate and up projections. Saves only ``gate`` and ``up``
    for backward (the composite also saves ``silu(gate)``). Shapes and dtypes must match, else
    torch's composite runs.
    """
    supported = gate.shape == up.shape and gate.dtype == up.dtype and on_kernel_path(gate, up) and gate.numel() > 0
    path = route(supported, gate.dtype, silu_mul=gate.numel())
    if path is Path.TORCH:
        return _silu_mul_torch(gate, up)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.silu_mul(gate, up)
    if path is Path.COMPOSITE:
        return _silu_mul_composite(gate, up)
    return TilegradSiluMul.apply(gate, up)


def swiglu(input: Tensor, dim: int = -1) -> Tensor:
    """The vendor's SwiGLU on one tensor: ``a, b = input.chunk(2, dim); F.silu(a) * b``
    (``aclnnSwiGlu`` / ``aclnnSwiGluGrad``). ``input.shape[dim]`` must be even."""
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"swiglu: dim must be in [{-input.dim()}, {input.dim() - 1}], got {dim}")
    if input.shape[dim] % 2:
        raise ValueError(f"swiglu: input.shape[{dim}] must be even, got {input.shape[dim]}")
    dim %= input.dim()
    path = route(on_kernel_path(input) and input.numel() > 0, input.dtype, swiglu=input.numel())
    if path is Path.TORCH:
        return _swi_glu_torch(input, dim)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.swi_glu(input, dim)
    if path is Path.COMPOSITE:
        return _swi_glu_composite(input, dim)
    return TilegradSwiGlu.apply(input, dim)
