"""Rotary position embedding in PyTorch (``aclnnRotaryPositionEmbedding``,
``aclnnRotaryPositionEmbeddingGrad``): ``tilegrad.torch.rotary_position_embedding`` (the vendor's
modes 0-3) and Hugging Face's ``apply_rotary_pos_emb`` on it, forward and backward on tilegrad.

- ``tilegrad::rotary_position_embedding`` (autograd on ``tilegrad::rotary_position_embedding_grad``):
  the ``torch.compile`` path.
- :class:`TilegradRope`: the eager node, calling the core directly.
- The composite (below the crossover, under ``torch.func``, and second derivatives): the vendor's
  formulas in torch ops on float32, the output rounded once.

The backward saves only ``cos`` and ``sin`` (and the input when they need a gradient).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _core
from ._eager import on_kernel_path, recompute_grads, rounded_once, route
from ._library import KernelFunction, OpKernel, like_first_argument
from ._tensor import as_numpy, new_output, new_output_like, sync_threads

# ---------------------------------------------------------------------------------------------------
# The formulas in torch ops (the fallback, and on float32 the composite)


_ROPE_MODES = (0, 1, 2, 3)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope_torch(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    """The vendor's formulas in torch ops, in the tensors' dtypes (the fallback, and the reference in
    the docs)."""
    if mode == 0:
        return input * cos + _rotate_half(input) * sin
    if mode == 1:
        pairs = input.unflatten(-1, (-1, 2))
        rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
        return input * cos + rotated * sin
    if mode == 2:
        quarter = input.shape[-1] // 4
        x1, x2, x3, x4 = input.split(quarter, dim=-1)
        return input * cos + torch.cat((-x2, x1, -x4, x3), dim=-1) * sin
    even, odd = input[..., 0::2], input[..., 1::2]
    return torch.cat((even, odd), dim=-1) * cos + torch.cat((-odd, even), dim=-1) * sin


def _rope_composite(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x, c, s: _rope_torch(x, c, s, mode), input.dtype, input, cos, sin)


# ---------------------------------------------------------------------------------------------------
# The kernels, the ops and the eager node


def _rope_impl(input: Tensor, cos: Tensor, sin: Tensor, mode: int, like_input: bool = False) -> Tensor:
    """``like_input`` (the eager node): the output laid out in memory as the input is, so Hugging Face's
    ``(B, S, N, D)`` projections seen as ``(B, N, S, D)`` stay in that layout through attention (no
    copy back); the op keeps a contiguous output (its fake kernel says so)."""
    sync_threads()
    out = new_output_like(input) if like_input else new_output(input.shape, input.dtype)
    _core.rotary_position_embedding(as_numpy(input), as_numpy(cos), as_numpy(sin), mode, as_numpy(out))
    return out


def _rope_eager(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    return _rope_impl(input, cos, sin, mode, like_input=True)


def _rope_setup(ctx, inputs, output) -> None:
    input, cos, sin, mode = inputs
    ctx.mode = mode
    # the input only when cos / sin need a gradient (dcos = sum dy * x): otherwise dx needs cos, sin alone
    ctx.save_for_backward(cos, sin, input if (cos.requires_grad or sin.requires_grad) else None)


def _rope_backward(ctx, grad: Tensor, grad_kernel):
    cos, sin, input = ctx.saved_tensors
    if torch.is_grad_enabled():
        if input is None:  # not saved (cos / sin need no gradient): the op is linear in its input, so
            input = torch.zeros_like(grad, requires_grad=True)  # any point gives the same gradient
        dx, dcos, dsin = recompute_grads(lambda x, c, s: _rope_composite(x, c, s, ctx.mode), (input, cos, sin),
                                         (grad,))
        return dx, dcos, dsin, None
    dx, dcos, dsin = grad_kernel(grad, cos, sin, input, ctx.mode)
    wants_trig = input is not None
    return dx, (dcos if wants_trig else None), (dsin if wants_trig else None), None


def _rope_grad_kernel(grad: Tensor, cos: Tensor, sin: Tensor, input: Optional[Tensor], mode: int,
                      like_grad: bool = True) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """dx (laid out as ``grad`` is, with ``like_grad``: the eager node's), and dcos / dsin (cos's shape)
    when the input is given, else None (nothing computed)."""
    sync_threads()
    dx = new_output_like(grad) if like_grad else new_output(grad.shape, grad.dtype)
    dcos, dsin = (None, None) if input is None else (new_output(cos.shape, cos.dtype), new_output(sin.shape, sin.dtype))
    _core.rotary_position_embedding_grad(as_numpy(grad), as_numpy(cos), as_numpy(sin),
                                         None if input is None else as_numpy(input), mode, as_numpy(dx),
                                         None if dcos is None else as_numpy(dcos),
                                         None if dsin is None else as_numpy(dsin))
    return dx, dcos, dsin


def _rope_grad_impl(grad: Tensor, cos: Tensor, sin: Tensor, input: Optional[Tensor], mode: int
                    ) -> Tuple[Tensor, Tensor, Tensor]:
    """The op's kernel: contiguous dx; dcos / dsin not computed are 0-element placeholders (an op
    cannot return None)."""
    dx, dcos, dsin = _rope_grad_kernel(grad, cos, sin, input, mode, like_grad=False)
    if dcos is None:
        return dx, cos.new_empty([0]), sin.new_empty([0])
    return dx, dcos, dsin


def _rope_grad_fake(grad, cos, sin, input, mode):
    if input is None:
        return grad.new_empty(grad.shape), cos.new_empty([0]), sin.new_empty([0])
    return grad.new_empty(grad.shape), cos.new_empty(cos.shape), sin.new_empty(sin.shape)


_ROPE = KernelFunction(
    OpKernel("rotary_position_embedding(Tensor input, Tensor cos, Tensor sin, int mode) -> Tensor", _rope_impl,
             like_first_argument, eager=_rope_eager),
    OpKernel("rotary_position_embedding_grad(Tensor grad, Tensor cos, Tensor sin, Tensor? input, int mode) "
             "-> (Tensor, Tensor, Tensor)", _rope_grad_impl, _rope_grad_fake, eager=_rope_grad_kernel),
    node_name="TilegradRope", node_doc="The eager path: ``aclnnRotaryPositionEmbedding(Grad)``.",
    composite=_rope_composite, torch_function=_rope_torch, setup=_rope_setup, backward=_rope_backward)
TilegradRope = _ROPE.node


# ---------------------------------------------------------------------------------------------------
# Public functions


def _rope_on_kernel(input: Tensor, cos: Tensor, sin: Tensor) -> bool:
    return (input.dim() == 4 and cos.dim() == 4 and cos.shape == sin.shape and input.dtype == cos.dtype == sin.dtype
            and input.shape[-1] == cos.shape[-1] and input.shape[-1] % 2 == 0 and input.numel() > 0
            and on_kernel_path(input, cos, sin)
            and all(c in (1, x) for c, x in zip(cos.shape[:3], input.shape[:3])))


def rotary_position_embedding(input: Tensor, cos: Tensor, sin: Tensor, mode: int = 0) -> Tensor:
    """The vendor's rotary position embedding (``aclnnRotaryPositionEmbedding``), autograd-aware.

    ``input`` 4-D, ``cos`` / ``sin`` 4-D broadcasting over ``input``'s first three dims, same dtype;
    mode 0 rotate-half (Hugging Face), 1 interleaved pairs (GPT-J / Meta), 2 rotate-half per half of
    the head dim, 3 de-interleave then rotate-half (the vendor's formulas). ``cos`` / ``sin`` get
    gradients (summed over the broadcast dims) when they require them.
    """
    if mode not in _ROPE_MODES:
        raise ValueError(f"rotary_position_embedding: mode must be 0, 1, 2 or 3, got {mode}")
    path = route(_rope_on_kernel(input, cos, sin), input.dtype, rope=input.numel())
    return _ROPE.run(path, input, cos, sin, mode)


def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int = 1
                         ) -> Tuple[Tensor, Tensor]:
    """Hugging Face's ``apply_rotary_pos_emb`` (rotate-half) on tilegrad: same signature and result.

    ``cos`` / ``sin`` of shape (batch, seq, rotary_dim) are unsqueezed at ``unsqueeze_dim`` and
    broadcast over the heads of ``q`` and ``k`` (which may have different head counts); the
    backward saves only ``cos`` and ``sin`` (the composite saves rotated copies of q and k). A
    ``rotary_dim`` below the head dim (Phi-3's ``partial_rotary_factor``) rotates the first
    ``rotary_dim`` features of each head and passes the rest through, as Phi-3's own function does.
    """
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return _rotate_leading(q, cos, sin), _rotate_leading(k, cos, sin)


def _rotate_leading(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Mode-0 rotary embedding of ``x``'s first ``cos.shape[-1]`` features; the others unchanged."""
    rotary_dim = cos.shape[-1]
    if rotary_dim >= x.shape[-1]:
        return rotary_position_embedding(x, cos, sin, 0)
    return torch.cat((rotary_position_embedding(x[..., :rotary_dim], cos, sin, 0), x[..., rotary_dim:]), dim=-1)
