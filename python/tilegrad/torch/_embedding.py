"""Embedding in PyTorch (``aclnnEmbeddingDenseBackward``): ``tilegrad.torch.embedding``, whose forward is
torch's on every path and whose weight gradient runs tilegrad's deterministic kernel (float32 row sums).

- ``tilegrad::embedding_dense_backward`` (the kernel) and ``tilegrad::embedding`` (torch's forward,
  autograd on it): the ``torch.compile`` path.
- :class:`TilegradEmbedding`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``): torch's embedding (float32 weights:
  float32 row sums; 16-bit weights take the kernel at every size).
"""

import math
from typing import Optional

import torch
from torch import Tensor

from .. import _core
from ._eager import TORCH_FUNCTIONS, Path, is_index_tensor, needs_autograd, on_kernel_path, route
from ._library import KernelFunction, OpKernel
from ._tensor import as_numpy, new_output, sync_threads

# ---------------------------------------------------------------------------------------------------
# The kernel, the ops and the eager node


def _embedding_dense_backward_impl(grad_output: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                                   scale_grad_by_freq: bool) -> Tensor:
    sync_threads()
    out = new_output((num_weights, grad_output.shape[-1]), grad_output.dtype)
    _core.embedding_dense_backward(as_numpy(grad_output), as_numpy(indices), num_weights, padding_idx,
                                   scale_grad_by_freq, as_numpy(out))
    return out


def _embedding_dense_backward_fake(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    return grad_output.new_empty((num_weights, grad_output.shape[-1]))


def _embedding_impl(weight: Tensor, indices: Tensor, padding_idx: int, scale_grad_by_freq: bool) -> Tensor:
    """torch's embedding, the forward of every path (float32 weights: float32 row sums)."""
    return torch.embedding(weight, indices, padding_idx, scale_grad_by_freq, False)


def _embedding_fake(weight, indices, padding_idx, scale_grad_by_freq):
    return weight.new_empty((*indices.shape, weight.shape[1]))


def _embedding_setup(ctx, inputs, output) -> None:
    weight, indices, padding_idx, scale_grad_by_freq = inputs
    ctx.options = (weight.shape[0], padding_idx, scale_grad_by_freq)
    ctx.save_for_backward(indices)


def _embedding_backward(ctx, grad: Tensor, kernel):
    """The weight gradient on both paths (``kernel``). With grad mode on (``create_graph=True``) it
    refuses: torch's differentiable formula did not match torch's own second derivative in the tests."""
    if torch.is_grad_enabled():
        raise RuntimeError("tilegrad.torch.embedding: second derivatives (a backward with create_graph=True) are "
                           "not supported; use torch.nn.functional.embedding for this layer")
    (indices,) = ctx.saved_tensors
    num_weights, padding_idx, scale_grad_by_freq = ctx.options
    return kernel(grad, indices, num_weights, padding_idx, scale_grad_by_freq), None, None, None


_EMBEDDING = KernelFunction(
    OpKernel("embedding(Tensor weight, Tensor indices, int padding_idx, bool scale_grad_by_freq) -> Tensor",
             _embedding_impl, _embedding_fake),
    OpKernel("embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, int padding_idx, "
             "bool scale_grad_by_freq) -> Tensor", _embedding_dense_backward_impl, _embedding_dense_backward_fake),
    node_name="TilegradEmbedding",
    node_doc="Forward: torch's ``embedding``; weight gradient: ``aclnnEmbeddingDenseBackward``.",
    composite=_embedding_impl, setup=_embedding_setup, backward=_embedding_backward)
TilegradEmbedding = _EMBEDDING.node


# ---------------------------------------------------------------------------------------------------
# Public function


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``F.embedding``; the weight gradient runs tilegrad's ``embedding_dense_backward``
    (``aclnnEmbeddingDenseBackward``: deterministic, float32 row sums). ``max_norm`` and
    ``sparse=True`` go to torch's ``F.embedding``. float16 / bfloat16 weights take the kernel at every
    size, except under ``torch.func`` transforms, where torch's embedding runs (16-bit weight gradients
    then summed in 16 bits, as torch does: keeping float32 sums there would need a float32 copy of the
    whole weight)."""
    supported = (max_norm is None and not sparse and on_kernel_path(weight) and is_index_tensor(input)
                 and weight.dim() == 2 and input.dim() != 0)
    path = route(supported, weight.dtype, wants_grad=needs_autograd(weight),
                 embedding=input.numel() * math.prod(weight.shape[1:]))
    if path is Path.TORCH:
        return TORCH_FUNCTIONS["embedding"](input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                                            sparse)
    return _EMBEDDING.run(path, weight, input, _kernel_padding_idx(padding_idx, weight.shape[0]), scale_grad_by_freq)


def _kernel_padding_idx(padding_idx: Optional[int], num_weights: int) -> int:
    """torch's padding_idx (None, or in [-num_weights, num_weights)) as the kernel's: -1 for none."""
    if padding_idx is None:
        return -1
    if not -num_weights <= padding_idx < num_weights:
        raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num_weights}), got {padding_idx}")
    return padding_idx % num_weights
