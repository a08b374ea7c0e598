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
from ._eager import check_halves, elementwise_on_kernel_path, rounded_once, route
from ._library import KernelFunction, OpKernel, like_first_argument
from ._tensor import as_numpy, new_output, sync_threads

_APPROXIMATIONS = ("none", "tanh")


def _torch_gelu(input: Tensor, approximate: str) -> Tensor:
    # torch's own gelu (F.gelu is this builtin), never a rerouted torch.nn.functional attribute
    return torch._C._nn.gelu(input, approximate=approximate)


def _check_approximate(op: str, approximate: str) -> None:
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"tilegrad.torch.{op}: approximate must be 'none' or 'tanh', got {approximate!r}")


# ---------------------------------------------------------------------------------------------------
# gelu: the kernels, the composite, the ops and the eager node


def _gelu_impl(input: Tensor, approximate: str) -> Tensor:
    sync_threads()
    out = new_output(input.shape, input.dtype)
    _core.gelu(as_numpy(input), approximate, as_numpy(out))
    return out


def _gelu_backward_impl(grad: Tensor, input: Tensor, approximate: str) -> Tensor:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    _core.gelu_backward(as_numpy(grad), as_numpy(input), approximate, as_numpy(dx))
    return dx


def _gelu_backward_fake(grad, input, approximate):
    return input.new_empty(input.shape)


def _gelu_composite(input: Tensor, approximate: str) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x: _torch_gelu(x, approximate), input.dtype, input)


_GELU = KernelFunction(
    OpKernel("gelu(Tensor input, str approximate) -> Tensor", _gelu_impl, like_first_argument),
    OpKernel("gelu_backward(Tensor grad, Tensor input, str approximate) -> Tensor", _gelu_backward_impl,
             _gelu_backward_fake),
    node_name="TilegradGelu", node_doc="The eager path of gelu: ``aclnnGeluV2`` / ``aclnnGeluBackwardV2``.",
    composite=_gelu_composite, torch_function=_torch_gelu)
TilegradGelu = _GELU.node


# ---------------------------------------------------------------------------------------------------
# gelu_mul: the kernels, the composite, the ops and the eager node


def _gelu_mul_impl(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    sync_threads()
    out = new_output(gate.shape, gate.dtype)
    _core.gelu_mul(as_numpy(gate), as_numpy(up), approximate, as_numpy(out))
    return out


def _gelu_mul_backward_impl(grad: Tensor, gate: Tensor, up: Tensor, approximate: str) -> Tuple[Tensor, Tensor]:
    sync_threads()
    d_gate, d_up = new_output(gate.shape, gate.dtype), new_output(up.shape, up.dtype)
    _core.gelu_mul_backward(as_numpy(grad), as_numpy(gate), as_numpy(up), approximate, as_numpy(d_gate),
                            as_numpy(d_up))
    return d_gate, d_up


def _gelu_mul_backward_fake(grad, gate, up, approximate):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


def _gelu_mul_torch(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    """The formula in torch ops, with torch's dtype promotion."""
    return _torch_gelu(gate, approximate) * up


def _gelu_mul_composite(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda g, u: _gelu_mul_torch(g, u, approximate), gate.dtype, gate, up)


_GELU_MUL = KernelFunction(
    OpKernel("gelu_mul(Tensor gate, Tensor up, str approximate) -> Tensor", _gelu_mul_impl, like_first_argument),
    OpKernel("gelu_mul_backward(Tensor grad, Tensor gate, Tensor up, str approximate) -> (Tensor, Tensor)",
             _gelu_mul_backward_impl, _gelu_mul_backward_fake),
    node_name="TilegradGeluMul", node_doc="The eager path of gelu_mul: tilegrad's two-tensor GeGLU kernels.",
    composite=_gelu_mul_composite, torch_function=_gelu_mul_torch)
TilegradGeluMul = _GELU_MUL.node


# ---------------------------------------------------------------------------------------------------
# Public functions


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``F.gelu`` with the forward and backward on tilegrad (``aclnnGeluV2`` / ``aclnnGeluBackwardV2``).

    ``approximate="none"``: ``x * Phi(x)`` (erf); ``"tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))``. Backward saves only the input. fp16 / bf16: computed in fp32, rounded once (as torch's
    CPU kernel). What the kernels do not take (other devices or dtypes, tensor subclasses) runs
    torch's ``F.gelu``.
    """
    _check_approximate("gelu", approximate)
    path = route(elementwise_on_kernel_path(input), input.dtype, gelu=input.numel())
    return _GELU.run(path, input, approximate)


def gelu_mul(gate: Tensor, up: Tensor, approximate: str = "tanh") -> Tensor:
    """``F.gelu(gate, approximate=approximate) * up`` in one pass, and one backward pass giving both
    gradients (GeGLU on two tensors: how a Gemma MLP combines its gate and up projections, with
    ``approximate="tanh"``, transformers' ``gelu_pytorch_tanh``).

    Saves only ``gate`` and ``up`` for backward (the composite also saves ``gelu(gate)``). fp32
    arithmetic, each output rounded once. Shapes and dtypes must match, else torch's composite runs.
    """
    _check_approximate("gelu_mul", approximate)
    path = route(elementwise_on_kernel_path(gate, up), gate.dtype, gelu_mul=gate.numel())
    return _GELU_MUL.run(path, gate, up, approximate)


def geglu(input: Tensor, dim: int = -1, approximate: str = "tanh") -> Tensor:
    """GeGLU on one tensor: ``gate, up = input.chunk(2, dim); F.gelu(gate, approximate=...) * up`` (the
    first half activated, as :func:`tilegrad.torch.swiglu`; ``aclnnGeGluV3`` with ``activateLeft``).
    :func:`gelu_mul` on the two halves, which the kernels read in place. ``input.shape[dim]`` must be
    even."""
    check_halves("geglu", input, dim)
    gate, up = input.chunk(2, dim)
    return gelu_mul(gate, up, approximate)
