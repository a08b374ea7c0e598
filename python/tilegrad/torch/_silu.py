"""SiLU in PyTorch (``aclnnSiluBackward``): ``tilegrad.torch.silu``, whose forward is torch's silu on
every path and whose backward runs tilegrad's kernel.

- ``tilegrad::silu_backward`` (the kernel) and ``tilegrad::silu`` (torch's forward, autograd on
  ``silu_backward``): the ``torch.compile`` path.
- :class:`TilegradSilu`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``): torch's silu and silu_backward, float32
  arithmetic rounded once, as the kernel.
"""

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, needs_autograd, on_kernel_path, route
from ._library import KernelFunction, OpKernel
from ._tensor import as_numpy, new_output, sync_threads

# ---------------------------------------------------------------------------------------------------
# The kernels, the ops and the eager node


def _silu_backward_dtype(grad_output: Tensor, input: Tensor) -> torch.dtype:
    return input.dtype if grad_output.dtype == input.dtype else torch.float32


def _broadcast_shape(a: Tensor, b: Tensor) -> torch.Size:
    # torch.broadcast_shapes costs ~15 us a call; equal shapes (the common case) need none of it.
    return a.shape if a.shape == b.shape else torch.broadcast_shapes(a.shape, b.shape)


def _silu_backward_output(grad_output: Tensor, input: Tensor) -> Tensor:
    """The gradient's tensor: in the input's memory format (a channels_last input gets a channels_last
    gradient, as torch's; the kernel writes any strides) when the shapes match and the input is not
    contiguous; otherwise contiguous (large ones from the recycled pool). The fake kernel calls this too."""
    dtype = _silu_backward_dtype(grad_output, input)
    if grad_output.shape == input.shape and (not input.is_contiguous() or input.numel() < 1 << 20):
        # (~3 us cheaper per call than torch.empty(shape, dtype=...))
        return torch.empty_like(input, dtype=dtype)
    return new_output(_broadcast_shape(grad_output, input), dtype)


def _silu_backward_impl(grad_output: Tensor, input: Tensor) -> Tensor:
    sync_threads()
    out = _silu_backward_output(grad_output, input)
    _core.silu_backward(as_numpy(grad_output), as_numpy(input), as_numpy(out))
    return out


def _silu_backward_fake(grad_output: Tensor, input: Tensor) -> Tensor:
    if grad_output.shape == input.shape:
        return torch.empty_like(input, dtype=_silu_backward_dtype(grad_output, input))
    return input.new_empty(_broadcast_shape(grad_output, input), dtype=_silu_backward_dtype(grad_output, input))


def _silu_impl(input: Tensor) -> Tensor:
    return torch._C._nn.silu(input)


def _silu_fake(input: Tensor) -> Tensor:
    return torch.empty_like(input)


# The backward recomputes the gradient through torch's differentiable silu under grad mode
# (create_graph=True: second derivatives), else runs the kernel.
_SILU = KernelFunction(
    OpKernel("silu(Tensor input) -> Tensor", _silu_impl, _silu_fake),
    OpKernel("silu_backward(Tensor grad_output, Tensor input) -> Tensor", _silu_backward_impl, _silu_backward_fake),
    node_name="TilegradSilu",
    node_doc="Forward: torch's ``silu``; backward: ``aclnnSiluBackward`` (in the input's memory format).",
    composite=torch._C._nn.silu)
TilegradSilu = _SILU.node


# ---------------------------------------------------------------------------------------------------
# Public function


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``F.silu``; the backward runs tilegrad's ``silu_backward`` (``aclnnSiluBackward``)."""
    path = route(not inplace and on_kernel_path(input), input.dtype, wants_grad=needs_autograd(input),
                 silu=input.numel())
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["silu"](input, inplace=inplace)
    # the composite is torch's silu and silu_backward: float32 arithmetic, rounded once, as the kernel
    return _SILU.run(path, input)
