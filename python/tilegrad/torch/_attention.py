"""Attention in PyTorch on tilegrad's flash attention (``aclnnFlashAttentionScore`` and its grad).

``scaled_dot_product_attention`` takes ``F.scaled_dot_product_attention``'s arguments on
``(B, N, S, D)`` tensors and routes them like every tilegrad.torch function (``_eager.route``):
torch's own function for what the kernels do not take, the ``tilegrad::flash_attention`` op under
``torch.compile`` / ``torch.export``, a float32 composite under a ``torch.func`` transform, and an
eager autograd node on the C++ core otherwise. The forward saves only query, key, value, the output
and two float32 statistics per query row (``max`` and ``sum`` of the softmax); the backward
recomputes the probabilities from them.

The kernels' masks are the vendor's (1 = masked): SDPA's boolean ``attn_mask`` (True = attend) is
inverted, an additive float mask is taken where it holds only ``0`` and ``-inf`` (exactly a boolean
mask), ``is_causal`` is the vendor's sparse mode 2 (causal from the top left, as torch's; with a mask, mode 0
with nextTokens = 0). Anything
else (dropout, other additive masks, a mask that needs a gradient, Dv > D, other ranks and
dtypes) runs torch's function, so a call never gives a wrong result.

``hf_attention_forward`` is the same function in transformers' attention-function interface
(``transformers.AttentionInterface``); ``register_with_transformers`` registers it (and SDPA's mask
builder) under the name ``"tilegrad"`` for ``tgt.patch``.
"""

import math
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from .. import _core
from ._eager import Path, needs_autograd, on_kernel_path, recompute_grads, route, rounded_once
from ._library import define
from ._tensor import as_numpy, new_output, new_output_like, sync_threads

__all__ = ["scaled_dot_product_attention"]

# torch's own function, captured before anything can reroute torch.nn.functional.
_TORCH_SDPA = F.scaled_dot_product_attention

# The vendor's causal modes take a 2048 x 2048 mask whose contents are not read (only its shape).
_TEMPLATE_SIDE = 2048
_SPARSE_CAUSAL = 2  # j <= i: causal from the top left, as torch's is_causal
_MAX_HEAD_DIM = 768  # the kernels' D range is [1, 768]
_causal_template: Optional[np.ndarray] = None

# The transformers attention implementation name patch sets on a model's config.
HF_IMPLEMENTATION = "tilegrad"


def _template() -> np.ndarray:
    global _causal_template
    if _causal_template is None:
        _causal_template = np.triu(np.ones((_TEMPLATE_SIDE, _TEMPLATE_SIDE), np.bool_), 1)
    return _causal_template


def _core_options(n1: int, scale: float, is_causal: bool, masked: Optional[Tensor]) -> dict:
    """The vendor's attributes: causal alone is sparse mode 2; causal and a mask is mode 0 with the
    band's nextTokens = 0 (j <= i) over the explicit mask, as torch combines them."""
    unbounded = 2147483647
    mode = _SPARSE_CAUSAL if is_causal and masked is None else 0
    next_tokens = 0 if is_causal and masked is not None else unbounded
    return dict(scale_value=scale, keep_prob=1.0, pre_tokens=unbounded, next_tokens=next_tokens, head_num=n1,
                input_layout="BNSD", inner_precise=0, sparse_mode=mode)


def _core_mask(masked: Optional[Tensor], is_causal: bool) -> Optional[np.ndarray]:
    """The vendor's attenMask: the explicit mask (1 = masked), else the causal template, or none."""
    if masked is not None:
        return as_numpy(masked)
    return _template() if is_causal else None


def _lanes(stat: Tensor) -> Tensor:
    """A (B, N, Sq) statistic as the vendor's (B, N, Sq, 8), without a copy (the grad reads lane 0)."""
    return stat.unsqueeze(-1).expand(*stat.shape, 8)


# ---------------------------------------------------------------------------------------------------
# tilegrad::flash_attention (forward, saving the row statistics) and tilegrad::flash_attention_backward


def _out_shape(query: Tensor, value: Tensor) -> Tuple[int, int, int, int]:
    return (query.shape[0], query.shape[1], query.shape[2], value.shape[3])


def _flash_attention_impl(query: Tensor, key: Tensor, value: Tensor, masked: Optional[Tensor], is_causal: bool,
                          scale: float, like_inputs: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
    """``like_inputs`` (the eager node): the output laid out in memory as the query is (torch's SDPA
    does the same), so Hugging Face's ``(B, S, N, D)`` projections seen as ``(B, N, S, D)`` give an
    output whose ``transpose(1, 2)`` is contiguous, with no copy; the ops keep contiguous outputs
    (their fake kernels say so)."""
    sync_threads()
    out = new_output_like(query, value.shape[3]) if like_inputs else new_output(_out_shape(query, value), query.dtype)
    stats = new_output((2,) + tuple(query.shape[:3]) + (8,), torch.float32)
    _core.flash_attention_score(as_numpy(query), as_numpy(key), as_numpy(value), _core_mask(masked, is_causal),
                                softmax_max_out=as_numpy(stats[0]), softmax_sum_out=as_numpy(stats[1]),
                                out=as_numpy(out), **_core_options(query.shape[1], scale, is_causal, masked))
    # Lane 0 only: the 8 copies are the vendor's layout, the backward needs one float per row each.
    return out, stats[0, ..., 0].contiguous(), stats[1, ..., 0].contiguous()


def _flash_attention_fake(query, key, value, masked, is_causal, scale):
    rows = query.shape[:3]
    return (query.new_empty(_out_shape(query, value)), query.new_empty(rows, dtype=torch.float32),
            query.new_empty(rows, dtype=torch.float32))


def _flash_attention_backward_impl(grad: Tensor, query: Tensor, key: Tensor, value: Tensor, out: Tensor,
                                   softmax_max: Tensor, softmax_sum: Tensor, masked: Optional[Tensor],
                                   is_causal: bool, scale: float, like_inputs: bool = False
                                   ) -> Tuple[Tensor, Tensor, Tensor]:
    """``like_inputs`` (the eager node): each gradient laid out in memory as its input is, so the
    model's view back to ``(B, S, N * D)`` needs no copy (autograd's reshape copies a transposed one)."""
    sync_threads()
    dq, dk, dv = (new_output_like(t) if like_inputs else new_output(t.shape, t.dtype) for t in (query, key, value))
    _core.flash_attention_score_grad(as_numpy(query), as_numpy(key), as_numpy(value), as_numpy(grad),
                                     _core_mask(masked, is_causal), as_numpy(_lanes(softmax_max)),
                                     as_numpy(_lanes(softmax_sum)), as_numpy(out), dq_out=as_numpy(dq),
                                     dk_out=as_numpy(dk), dv_out=as_numpy(dv),
                                     **_core_options(query.shape[1], scale, is_causal, masked))
    return dq, dk, dv


def _flash_attention_backward_fake(grad, query, key, value, out, softmax_max, softmax_sum, masked, is_causal, scale):
    return (query.new_empty(query.shape), key.new_empty(key.shape), value.new_empty(value.shape))


def _save_for_backward(ctx, query, key, value, masked, is_causal, scale, out, softmax_max, softmax_sum) -> None:
    ctx.options = (is_causal, scale)
    ctx.save_for_backward(query, key, value, masked, out, softmax_max, softmax_sum)


def _attention_backward(ctx, grad: Tensor, kernel):
    """The gradients on both paths: ``kernel`` (the backward op, or the core directly), or with grad
    mode on (``create_graph=True``) recomputed through the differentiable composite."""
    query, key, value, masked, out, softmax_max, softmax_sum = ctx.saved_tensors
    is_causal, scale = ctx.options
    if torch.is_grad_enabled():
        return tuple(recompute_grads(lambda q, k, v: _composite(q, k, v, masked, is_causal, scale),
                                     (query, key, value), (grad,)))
    return kernel(grad, query, key, value, out, softmax_max, softmax_sum, masked, is_causal, scale)


def _flash_attention_setup(ctx, inputs, output) -> None:
    query, key, value, masked, is_causal, scale = inputs
    out, softmax_max, softmax_sum = output
    ctx.mark_non_differentiable(softmax_max, softmax_sum)
    _save_for_backward(ctx, query, key, value, masked, is_causal, scale, out, softmax_max, softmax_sum)


def _flash_attention_grad(ctx, grad: Tensor, unused_grad_max: Tensor, unused_grad_sum: Tensor):
    dq, dk, dv = _attention_backward(ctx, grad, torch.ops.tilegrad.flash_attention_backward)
    return dq, dk, dv, None, None, None


define("flash_attention(Tensor query, Tensor key, Tensor value, Tensor? masked, bool is_causal, float scale)"
        " -> (Tensor, Tensor, Tensor)", _flash_attention_impl, _flash_attention_fake,
        (_flash_attention_grad, _flash_attention_setup))
define("flash_attention_backward(Tensor grad, Tensor query, Tensor key, Tensor value, Tensor out, "
        "Tensor softmax_max, Tensor softmax_sum, Tensor? masked, bool is_causal, float scale) "
        "-> (Tensor, Tensor, Tensor)", _flash_attention_backward_impl, _flash_attention_backward_fake)


class TilegradAttention(torch.autograd.Function):
    """The eager path: forward and backward on the C++ core, no op dispatch."""

    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, value: Tensor, masked: Optional[Tensor], is_causal: bool,
                scale: float) -> Tensor:
        out, softmax_max, softmax_sum = _flash_attention_impl(query, key, value, masked, is_causal, scale,
                                                              like_inputs=True)
        _save_for_backward(ctx, query, key, value, masked, is_causal, scale, out, softmax_max, softmax_sum)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        dq, dk, dv = _attention_backward(ctx, grad, _eager_backward_kernel)
        return dq, dk, dv, None, None, None


def _eager_backward_kernel(*args) -> Tuple[Tensor, Tensor, Tensor]:
    return _flash_attention_backward_impl(*args, like_inputs=True)


def _composite(query: Tensor, key: Tensor, value: Tensor, masked: Optional[Tensor], is_causal: bool,
               scale: float) -> Tensor:
    """The kernels' numerics in torch ops (float32, the output rounded once), differentiable to any
    order and under torch.func transforms (torch's CPU flash kernel has no double backward)."""
    return rounded_once(lambda q, k, v: _math_attention(q, k, v, masked, is_causal, scale), query.dtype,
                        query, key, value)


def _math_attention(q: Tensor, k: Tensor, v: Tensor, masked: Optional[Tensor], is_causal: bool,
                    scale: float) -> Tensor:
    """softmax(scale q k^T, masked) v in plain torch ops; a row that keeps nothing gives 0."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if is_causal:
        sq, skv = s.shape[-2:]
        s = s.masked_fill(torch.ones(sq, skv, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    if masked is not None:
        s = s.masked_fill(masked, -math.inf)
    row_max = s.amax(dim=-1, keepdim=True).detach()
    e = (s - row_max.masked_fill(row_max == -math.inf, 0.0)).exp()
    total = e.sum(dim=-1, keepdim=True)
    return (e / total.masked_fill(total == 0, 1.0)) @ v


# ---------------------------------------------------------------------------------------------------
# the public function


def _shapes_supported(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool) -> bool:
    """(B, N, S, D) tensors of one dtype the kernels take: same batch, kv heads dividing query heads
    (only with enable_gqa, as torch), D in [1, 768], Dv <= D, nothing empty."""
    if not (query.dim() == key.dim() == value.dim() == 4 and query.dtype == key.dtype == value.dtype):
        return False
    (b, n1, sq, d), (bk, n2, skv, dk), (bv, nv, sv, dv) = query.shape, key.shape, value.shape
    if not (b == bk == bv and n2 == nv and skv == sv and d == dk and 1 <= dv <= d <= _MAX_HEAD_DIM):
        return False
    heads_ok = n1 == n2 or (enable_gqa and n2 > 0 and n1 % n2 == 0)
    return heads_ok and b * n1 * sq * skv > 0


def _kernel_mask(attn_mask: Optional[Tensor], query: Tensor, key: Tensor) -> Tuple[bool, Optional[Tensor]]:
    """``(supported, masked)``: SDPA's mask as the vendor's (True = masked), broadcast to
    (B, N1, Sq, Skv) without a copy; unsupported where it is not exactly a boolean mask."""
    if attn_mask is None:
        return True, None
    shape = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    if not _broadcasts_to(attn_mask.shape, shape) or attn_mask.device != query.device or attn_mask.requires_grad:
        return False, None
    if attn_mask.dtype == torch.bool:
        masked = ~attn_mask
    elif attn_mask.dtype == query.dtype and _is_boolean_additive(attn_mask):
        masked = attn_mask != 0
    else:
        return False, None
    return True, masked.expand(shape)


def _broadcasts_to(shape, target) -> bool:
    """``shape`` broadcasts to ``target`` (aligned from the right, each dim equal or 1)."""
    if len(shape) > len(target):
        return False
    return all(a == 1 or a == b for a, b in zip(reversed(tuple(shape)), reversed(tuple(target))))


def _is_boolean_additive(attn_mask: Tensor) -> bool:
    """An additive mask holding only 0 and -inf: exactly a boolean mask. Reads the values, so never
    while compiling (there such masks run torch's function)."""
    if torch.compiler.is_compiling():
        return False
    return bool(((attn_mask == 0) | (attn_mask == -math.inf)).all())


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention`` with the forward and backward on tilegrad
    (``aclnnFlashAttentionScore`` / ``aclnnFlashAttentionScoreGrad``).

    ``softmax(query key^T * scale + mask) value`` on ``(B, N, S, D)`` tensors; ``scale=None`` is
    ``1 / sqrt(D)``; ``enable_gqa=True`` lets ``N2`` key/value heads serve ``N1`` query heads
    (``N1 % N2 == 0``, query head ``n`` on kv head ``n // (N1 // N2)``), with no copy of key and value.
    ``attn_mask``: boolean (True = attend) or additive of the query's dtype, broadcastable to
    ``(B, N1, Sq, Skv)``; ``is_causal``: row ``i`` attends to columns ``j <= i`` (top-left aligned,
    as torch; with a mask too, torch's function answers, as the installed torch does). A row that attends to nothing gives 0 and no gradient.

    Computed in float32 (16-bit tensors widened exactly, the output and each gradient rounded once),
    bit-identical for every thread count. Backward saves only query, key, value, the output and two
    float32 values per query row. Runs torch's function where tilegrad does not apply (so a call is
    never wrong): ``dropout_p > 0``, an additive mask with values other than 0 and -inf, a mask that
    needs a gradient, value head dim larger than the query's, D > 768, tensors that are not 4-d,
    not on the CPU or of another dtype, batch dims that broadcast, and the argument errors torch
    raises (head counts without ``enable_gqa``, mismatched head dims).
    """
    # is_causal with a mask: torch 2.13 applies both, 2.14 refuses; its own function answers as it does.
    supported = (dropout_p == 0.0 and not (is_causal and attn_mask is not None) and on_kernel_path(query, key, value)
                 and _shapes_supported(query, key, value, enable_gqa))
    masked = None
    if supported:
        supported, masked = _kernel_mask(attn_mask, query, key)
    path = route(supported, query.dtype, wants_grad=True)
    if path is Path.TORCH:
        return _TORCH_SDPA(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa)
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    is_causal = bool(is_causal)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.flash_attention(query, key, value, masked, is_causal, scale)[0]
    if path is Path.COMPOSITE:
        return _composite(query, key, value, masked, is_causal, scale)
    if not needs_autograd(query, key, value):
        return _flash_attention_impl(query, key, value, masked, is_causal, scale, like_inputs=True)[0]
    return TilegradAttention.apply(query, key, value, masked, is_causal, scale)


# ---------------------------------------------------------------------------------------------------
# transformers' attention-function interface


def hf_attention_forward(module: torch.nn.Module, query: Tensor, key: Tensor, value: Tensor,
                         attention_mask: Optional[Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                         is_causal: Optional[bool] = None, **kwargs) -> Tuple[Tensor, None]:
    """transformers' ``sdpa_attention_forward`` on :func:`scaled_dot_product_attention`: the same
    masks (built by SDPA's mask function), causality rule and output layout ``(B, S, N, Dv)``; key and
    value heads are never repeated (GQA runs in the kernel). What SDPA's forward does beyond
    ``F.scaled_dot_product_attention`` (a position bias, a softcap) runs SDPA's forward itself."""
    if kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # As SDPA's forward: causal through the flag only while prefilling without a mask.
    is_causal = query.shape[2] > 1 and attention_mask is None and is_causal
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                       is_causal=is_causal, scale=scaling, enable_gqa=key.shape[1] != query.shape[1])
    # (a no-op for the (B, S, N, D) projections: the eager node writes the output in the query's layout)
    return out.transpose(1, 2).contiguous(), None


def register_with_transformers() -> str:
    """Register :func:`hf_attention_forward` with transformers' attention interface and SDPA's mask
    builder with its mask interface, under ``HF_IMPLEMENTATION`` (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(HF_IMPLEMENTATION, hf_attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(HF_IMPLEMENTATION, sdpa_mask)
    return HF_IMPLEMENTATION
