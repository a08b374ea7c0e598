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

from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, check_halves, elementwise_on_kernel_path, rounded_once, route
from ._library import KernelFunction, OpKernel, like_first_argument
from ._tensor import as_numpy, new_output, sync_threads

# ---------------------------------------------------------------------------------------------------
# swiglu: the kernels, the composite, the ops and the eager node


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


def _swi_glu_grad_impl(grad: Tensor, input: Tensor, dim: int) -> Tensor:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    _core.swi_glu_grad(as_numpy(grad), as_numpy(input), dim, as_numpy(dx))
    return dx


def _swi_glu_grad_fake(grad, input, dim):
    return input.new_empty(input.shape)


def _swi_glu_torch(input: Tensor, dim: int) -> Tensor:
    """The formula in torch ops, in the input's dtype."""
    a, b = input.chunk(2, dim)
    return TORCH_FUNCTIONS["silu"](a) * b


def _swi_glu_composite(input: Tensor, dim: int) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x: _swi_glu_torch(x, dim), input.dtype, input)


_SWI_GLU = KernelFunction(
    OpKernel("swi_glu(Tensor input, int dim) -> Tensor", _swi_glu_impl, _swi_glu_fake),
    OpKernel("swi_glu_grad(Tensor grad, Tensor input, int dim) -> Tensor", _swi_glu_grad_impl, _swi_glu_grad_fake),
    node_name="TilegradSwiGlu", node_doc="The eager path of swiglu: ``aclnnSwiGlu`` / ``aclnnSwiGluGrad``.",
    composite=_swi_glu_composite, torch_function=_swi_glu_torch)
TilegradSwiGlu = _SWI_GLU.node


# ---------------------------------------------------------------------------------------------------
# silu_mul: the kernels, the composite, the ops and the eager node


def _silu_mul_impl(gate: Tensor, up: Tensor) -> Tensor:
    sync_threads()
    out = new_output(gate.shape, gate.dtype)
    _core.silu_mul(as_numpy(gate), as_numpy(up), as_numpy(out))
    return out


def _silu_mul_grad_impl(grad: Tensor, gate: Tensor, up: Tensor) -> Tuple[Tensor, Tensor]:
    sync_threads()
    d_gate, d_up = new_output(gate.shape, gate.dtype), new_output(up.shape, up.dtype)
    _core.silu_mul_grad(as_numpy(grad), as_numpy(gate), as_numpy(up), as_numpy(d_gate), as_numpy(d_up))
    return d_gate, d_up


def _silu_mul_grad_fake(grad, gate, up):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


def _silu_mul_torch(gate: Tensor, up: Tensor) -> Tensor:
    """The formula in torch ops, with torch's dtype promotion."""
    return TORCH_FUNCTIONS["silu"](gate) * up


def _silu_mul_composite(gate: Tensor, up: Tensor) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(_silu_mul_torch, gate.dtype, gate, up)


_SILU_MUL = KernelFunction(
    OpKernel("silu_mul(Tensor gate, Tensor up) -> Tensor", _silu_mul_impl, like_first_argument),
    OpKernel("silu_mul_grad(Tensor grad, Tensor gate, Tensor up) -> (Tensor, Tensor)", _silu_mul_grad_impl,
             _silu_mul_grad_fake),
    node_name="TilegradSiluMul", node_doc="The eager path of silu_mul: the SwiGLU kernels on two tensors.",
    composite=_silu_mul_composite, torch_function=_silu_mul_torch)
TilegradSiluMul = _SILU_MUL.node


# ---------------------------------------------------------------------------------------------------
# Public functions


def silu_mul(gate: Tensor, up: Tensor) -> Tensor:
    """``F.silu(gate) * up`` in one pass, and one backward pass giving both gradients.

    How a Llama MLP combines its separate gate and up projections. Saves only ``gate`` and ``up``
    for backward (the composite also saves ``silu(gate)``). Shapes and dtypes must match, else
    torch's composite runs.
    """
    path = route(elementwise_on_kernel_path(gate, up), gate.dtype, silu_mul=gate.numel())
    return _SILU_MUL.run(path, gate, up)


def swiglu(input: Tensor, dim: int = -1) -> Tensor:
    """The vendor's SwiGLU on one tensor: ``a, b = input.chunk(2, dim); F.silu(a) * b``
    (``aclnnSwiGlu`` / ``aclnnSwiGluGrad``). ``input.shape[dim]`` must be even."""
    check_halves("swiglu", input, dim)
    path = route(elementwise_on_kernel_path(input), input.dtype, swiglu=input.numel())
    return _SWI_GLU.run(path, input, dim % input.dim())
