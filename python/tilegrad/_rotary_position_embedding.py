"""Rotary position embedding (``aclnnRotaryPositionEmbedding``) and its gradient
(``aclnnRotaryPositionEmbeddingGrad``)."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import argument_error, check_int

_FWD = "aclnnRotaryPositionEmbedding"
_GRAD = "aclnnRotaryPositionEmbeddingGrad"


def rotary_position_embedding(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, mode: int = 0, *,
                              out: Optional[np.ndarray] = None) -> np.ndarray:
    """Rotary position embedding: ``y = x * cos + rotate(x) * sin`` over the last dim ``D``.

    ``rotate`` by ``mode`` (``x1, x2`` the two halves of ``D``, ``q1..q4`` its quarters)::

        0 half            cat(-x2, x1)                      Hugging Face rotate_half (Llama, Qwen, Mistral)
        1 interleave      pairs (2i, 2i+1) -> (-x[2i+1], x[2i])   GPT-J, Meta Llama's complex pairs
        2 quarter         cat(-q2, q1, -q4, q3)             half mode within each half of D
        3 interleave-half y = cat(xe, xo) * cos + cat(-xo, xe) * sin,  xe = x[..., ::2], xo = x[..., 1::2]

    Mode 0 equals ``q * cos + rotate_half(q) * sin`` of Hugging Face's ``apply_rotary_pos_emb``
    (bit for bit in float32) and CANN ``aclnnRotaryPositionEmbedding``.

    Args:
        x: 4-D (for instance (B, S, N, D), (B, N, S, D) or (S, B, N, D)); float32, float16 or
            bfloat16; any strides. ``D`` even (a multiple of 4 in mode 2), at most 1024.
        cos, sin: one shape, ``x``'s dtype; 4-D with the last dim ``D`` and each leading dim 1 or
            ``x``'s (broadcast over the others: (1, S, 1, D), (B, 1, S, D), (1, 1, 1, D), ...).
        mode: 0, 1, 2 or 3 (an int).
        out: optional result of ``x``'s shape and dtype (any strides; may be ``x`` itself).

    Returns:
        ``out``, or a new C-contiguous array.

    Each product ``x * cos`` and ``rotate(x) * sin`` is rounded to float32, then their sum, once
    to the output dtype. Bad shapes or modes raise ValueError with ``code`` 561002 (the vendor's
    tiling error), bad dtypes ValueError 161002. The GIL is released while the kernel runs.
    """
    return _core.rotary_position_embedding(x, cos, sin, check_int(_FWD, "mode", mode), out)


def rotary_position_embedding_grad(dy: np.ndarray, cos: np.ndarray, sin: np.ndarray, x: Optional[np.ndarray] = None,
                                   mode: int = 0, *, out: Optional[Tuple[Optional[np.ndarray], Optional[np.ndarray],
                                                                         Optional[np.ndarray]]] = None
                                   ) -> Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """Gradient of :func:`rotary_position_embedding` with respect to ``x``, ``cos`` and ``sin``.

    With ``(first, second)`` the two elements of each rotated pair (see the forward's modes)::

        dx_first  = cos_first * dy_first + sin_second * dy_second
        dx_second = cos_second * dy_second - sin_first * dy_first
        dcos = sum(dy * x, dims),   dsin = sum(dy * rotate(x), dims)

    where ``dims`` are the leading dims over which ``cos`` / ``sin`` broadcast (mode 3 reads ``x``
    as ``cat(x[..., ::2], x[..., 1::2])``). Same as autograd through Hugging Face's
    ``q * cos + rotate_half(q) * sin`` (mode 0) and CANN ``aclnnRotaryPositionEmbeddingGrad``.

    Args:
        dy: gradient of the forward's output, 4-D; float32, float16 or bfloat16; any strides.
        cos, sin: the forward's, of ``dy``'s dtype (leading dims 1 or ``dy``'s).
        x: the forward's input (``dy``'s shape and dtype), or None: then only ``dx`` is computed.
        mode: 0, 1, 2 or 3.
        out: optional ``(dx, dcos, dsin)``, each None (allocated) or an array of the right shape
            and dtype (``dx``: ``dy``'s, may be ``dy`` itself; ``dcos``, ``dsin``: ``cos``'s). ``dcos``
            and ``dsin`` are written only when ``x`` is given.

    Returns:
        ``(dx, dcos, dsin)``; ``dcos`` and ``dsin`` are None when ``x`` is None (or the arrays
        given in ``out``, untouched).

    Products rounded to float32, sums in float32 in a fixed order (partials of consecutive rows
    added in block order in float64 when a cos row gathers many rows), each output rounded once:
    the same bits for any thread count. The GIL is released while the kernels run.
    """
    mode = check_int(_GRAD, "mode", mode)
    if out is None:
        out = (None, None, None)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise argument_error(TypeError, f"{_GRAD}: out must be a tuple (dx, dcos, dsin), got {out!r}")
    return tuple(_core.rotary_position_embedding_grad(dy, cos, sin, x, mode, *out))
