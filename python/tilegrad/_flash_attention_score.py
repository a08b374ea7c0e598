"""Flash attention forward and backward (``aclnnFlashAttentionScore``, ``aclnnFlashAttentionScoreGrad``)."""

from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _core
from ._args import check_float, check_int, check_str

_FWD = "aclnnFlashAttentionScore"
_BWD = "aclnnFlashAttentionScoreGrad"
_INT32_MAX = 2147483647


def _options(op: str, head_num: Any, input_layout: Any, scale_value: Any, keep_prob: Any, pre_tokens: Any,
             next_tokens: Any, inner_precise: Any, sparse_mode: Any) -> Dict[str, Any]:
    return dict(
        scale_value=check_float(op, "scale_value", scale_value),
        keep_prob=check_float(op, "keep_prob", keep_prob),
        pre_tokens=check_int(op, "pre_tokens", pre_tokens),
        next_tokens=check_int(op, "next_tokens", next_tokens),
        head_num=check_int(op, "head_num", head_num),
        input_layout=check_str(op, "input_layout", input_layout),
        inner_precise=check_int(op, "inner_precise", inner_precise),
        sparse_mode=check_int(op, "sparse_mode", sparse_mode),
    )


def flash_attention_score(query: np.ndarray, key: np.ndarray, value: np.ndarray, head_num: int,
                          input_layout: str, *, atten_mask: Optional[np.ndarray] = None, scale_value: float = 1.0,
                          keep_prob: float = 1.0, pre_tokens: int = _INT32_MAX, next_tokens: int = _INT32_MAX,
                          inner_precise: int = 0, sparse_mode: int = 0, out: Optional[np.ndarray] = None,
                          softmax_max_out: Optional[np.ndarray] = None,
                          softmax_sum_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Attention ``out = softmax(mask(scale_value * Q K^T)) V`` per batch and query head, with the
    softmax row statistics the backward reads.

    Same as CANN ``aclnnFlashAttentionScore`` (and ``torch_npu.npu_fusion_attention``'s first three
    outputs). PyTorch: ``F.scaled_dot_product_attention(q, k, v, attn_mask=~atten_mask, scale=scale_value,
    enable_gqa=True)`` on BNSD tensors; ``is_causal=True`` is ``sparse_mode=2`` with a 2048 x 2048 mask.

    Args:
        query: ``[B, Sq, N1*D]`` (BSH), ``[Sq, B, N1*D]`` (SBH), ``[B, Sq, N1, D]`` (BSND) or
            ``[B, N1, Sq, D]`` (BNSD); float32, float16 or bfloat16.
        key, value: the same layout and dtype with ``N2`` heads (``N1 % N2 == 0``: query head ``n``
            uses kv head ``n // (N1 // N2)``), ``Skv`` positions, head dims ``D`` and ``Dv <= D``.
        head_num: ``N1``, the query's head count.
        input_layout: ``"BSH"``, ``"SBH"``, ``"BSND"`` or ``"BNSD"``.
        atten_mask: optional bool/uint8, **1 = masked** (the opposite of SDPA's bool ``attn_mask``).
            Sparse modes 0 and 1: ``[B,N1,Sq,Skv]``, ``[B,1,Sq,Skv]``, ``[1,1,Sq,Skv]`` or ``[Sq,Skv]``.
            Modes 2, 3, 4: the ``2048 x 2048`` causal template (its contents are not read). Without a
            mask every position is kept, whatever ``sparse_mode`` says (as the vendor).
        scale_value: multiplies ``Q K^T`` (no default of ``1/sqrt(D)``, as the vendor).
        keep_prob: must be 1 (dropout is not supported yet).
        pre_tokens, next_tokens: the band of sparse modes 0 (left-up origin) and 4 (right-down origin).
        inner_precise: reserved (fully masked rows are always exact).
        sparse_mode: 0 mask (and band), 1 mask, 2 causal from the top left, 3 causal from the bottom
            right, 4 band from the bottom right.
        out, softmax_max_out, softmax_sum_out: optional outputs (any strides).

    Returns:
        ``(attention_out, softmax_max, softmax_sum)``: ``attention_out`` has ``query``'s shape with
        ``D`` replaced by ``Dv`` and ``query``'s dtype; the statistics are float32 ``[B, N1, Sq, 8]``
        (the value repeated in the 8 lanes): ``max`` of the scaled scores and ``sum(exp(S - max))``.
        A row with every position masked gives 0, ``max = -FLT_MAX``, ``sum = +FLT_MAX``.
        Arithmetic in float32 (16-bit inputs widened exactly), the output rounded once; bit-identical
        for every thread count. The GIL is released.
    """
    o = _options(_FWD, head_num, input_layout, scale_value, keep_prob, pre_tokens, next_tokens, inner_precise,
                 sparse_mode)
    return tuple(_core.flash_attention_score(query, key, value, atten_mask, softmax_max_out=softmax_max_out,
                                             softmax_sum_out=softmax_sum_out, out=out, **o))


def flash_attention_score_grad(query: np.ndarray, key: np.ndarray, value: np.ndarray, dy: np.ndarray,
                               head_num: int, input_layout: str, *, softmax_max: np.ndarray,
                               softmax_sum: np.ndarray, attention_out: np.ndarray,
                               atten_mask: Optional[np.ndarray] = None, scale_value: float = 1.0,
                               keep_prob: float = 1.0, pre_tokens: int = _INT32_MAX, next_tokens: int = _INT32_MAX,
                               inner_precise: int = 0, sparse_mode: int = 0, dq_out: Optional[np.ndarray] = None,
                               dk_out: Optional[np.ndarray] = None,
                               dv_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`flash_attention_score`: with ``P`` recomputed from the forward's
    statistics, ``dV = P^T dy``, ``dP = dy V^T``, ``dS = P * (dP - rowsum(dy * attention_out))``,
    ``dQ = scale_value * dS K``, ``dK = scale_value * dS^T Q`` (summed over a kv head's query heads).

    Same as CANN ``aclnnFlashAttentionScoreGrad``; the gradients of
    ``F.scaled_dot_product_attention``.

    Args:
        query, key, value, head_num, input_layout, atten_mask, scale_value, keep_prob, pre_tokens, next_tokens, inner_precise, sparse_mode: as given to the forward.
        dy: gradient of ``attention_out`` (its shape and dtype).
        softmax_max, softmax_sum, attention_out: the forward's outputs (lane 0 of the statistics is read).
        dq_out, dk_out, dv_out: optional outputs of the shapes and dtype of ``query``, ``key``, ``value``.

    Returns:
        ``(dq, dk, dv)``. Accumulated in float32 over the key/value (for dQ) or query (for dK, dV)
        blocks in a fixed order, each rounded once: bit-identical for every thread count. A fully
        masked row contributes nothing. The GIL is released.
    """
    o = _options(_BWD, head_num, input_layout, scale_value, keep_prob, pre_tokens, next_tokens, inner_precise,
                 sparse_mode)
    return tuple(_core.flash_attention_score_grad(query, key, value, dy, atten_mask, softmax_max, softmax_sum,
                                                  attention_out, dq_out=dq_out, dk_out=dk_out, dv_out=dv_out, **o))
