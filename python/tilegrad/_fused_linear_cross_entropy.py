"""Vocabulary-parallel fused linear cross entropy (``aclnnFusedLinearOnlineMaxSum``,
``aclnnFusedCrossEntropyLossWithMaxSum``, ``aclnnFusedLinearCrossEntropyLossGrad``) and the
single-process ``fused_linear_cross_entropy``."""

from typing import Optional, Tuple

import numpy as np

from . import _core

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def fused_linear_online_max_sum(input: np.ndarray, weight: np.ndarray, target: np.ndarray,
                                vocab_start_index: int, vocab_end_index: int, return_logits: bool = False
                                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           Optional[np.ndarray]]:
    """Per-rank statistics of a vocabulary-parallel cross entropy (CANN ``aclnnFusedLinearOnlineMaxSum``).

    This rank holds vocabulary rows ``[vocab_start_index, vocab_end_index)`` of the output projection.
    With ``L = input @ weight.T`` (fp32 accumulation), for each row ``i``:

    - ``logits_max[i] = max_j L[i, j]``, ``sum_exp_logits[i] = sum_j exp(L[i, j] - logits_max[i])``;
    - ``target_mask`` bit ``i`` (uint8, bit-packed LSB first, ``ceil(BT/8)`` bytes, padding bits 0)
      is 1 when ``target[i]`` is outside the shard;
    - ``masked_target[i] = target[i] - vocab_start_index`` inside the shard, else 0;
    - ``predicted_logits[i] = L[i, masked_target[i]] - logits_max[i]`` inside the shard, else 0.

    Args:
        input: ``(BT, H)`` float16, bfloat16 or float32.
        weight: ``(V, H)``, same dtype, ``V = vocab_end_index - vocab_start_index``.
        target: ``(BT,)`` int32 or int64 global vocabulary ids.
        return_logits: also return ``L`` rounded to the input dtype (``(BT, V)``).

    Returns:
        ``(logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits)``;
        the first three float32 ``(BT,)``, ``masked_target`` of target's dtype, ``logits`` None
        unless asked. Between ranks all-reduce: ``gmax = max(logits_max)``,
        ``gsum = sum(sum_exp_logits * exp(logits_max - gmax))``,
        ``gpred = sum(where(mask, 0, predicted_logits + logits_max - gmax))``.
    """
    return tuple(_core.fused_linear_online_max_sum(input, weight, target, int(vocab_start_index),
                                                   int(vocab_end_index), bool(return_logits)))


def fused_cross_entropy_loss_with_max_sum(logits_max: np.ndarray, sum_exp_logits: np.ndarray,
                                          predicted_logits: np.ndarray, label_smoothing: float = 0.0,
                                          logits: Optional[np.ndarray] = None
                                          ) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """Loss from the all-reduced statistics (CANN ``aclnnFusedCrossEntropyLossWithMaxSum``).

    ``loss = log(sum_exp_logits) - predicted_logits`` (float32 ``(BT,)``). With ``logits`` (``(BT, V)``,
    float32/float16/bfloat16) also ``softmax = exp(logits - logits_max[:, None]) / sum_exp_logits[:, None]``
    (float32), else ``softmax`` is None. ``label_smoothing`` must be 0.
    """
    return tuple(_core.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                                             float(label_smoothing), logits))


def fused_linear_cross_entropy_loss_grad(grad: np.ndarray, input: np.ndarray, weight: np.ndarray,
                                         target_mask: np.ndarray, masked_target: np.ndarray,
                                         label_smoothing: float = 0.0, logits_max: Optional[np.ndarray] = None,
                                         sum_exp_logits: Optional[np.ndarray] = None,
                                         softmax: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of the vocabulary-parallel cross entropy (CANN ``aclnnFusedLinearCrossEntropyLossGrad``).

    ``G = softmax`` when given (high-performance mode; the array is never modified), else
    ``G = exp(input @ weight.T - logits_max[:, None]) / sum_exp_logits[:, None]`` recomputed block by
    block (memory-saving mode: the ``(BT, V)`` matrix never exists whole). For each row whose
    ``target_mask`` bit is 0: ``G[i, masked_target[i]] -= 1``; then ``G[i, :] *= grad[i]``; G is
    rounded once to the input dtype; ``grad_input = G @ weight`` ``(BT, H)`` and
    ``grad_weight = G.T @ input`` ``(V, H)``, accumulated in float32 and rounded once.

    Args:
        grad: ``(BT,)`` float32 upstream gradient per row.
        input, weight: ``(BT, H)``, ``(V, H)`` float16, bfloat16 or float32 (same dtype).
        target_mask: uint8 bit-packed LSB first (``len * 8 >= BT``) or bool ``(BT,)``; 1 = target not
            in this shard.
        masked_target: ``(BT,)`` int32/int64 local target (must be in ``[0, V)`` where the bit is 0,
            else IndexError).
        logits_max, sum_exp_logits: ``(BT,)`` float32 global statistics (memory-saving mode).
        softmax: ``(BT, V)`` float32 (high-performance mode).

    Returns:
        ``(grad_input, grad_weight)`` in the input dtype.
    """
    return tuple(_core.fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                                            float(label_smoothing), logits_max, sum_exp_logits,
                                                            softmax))


def fused_linear_cross_entropy(input: np.ndarray, weight: np.ndarray, target: np.ndarray,
                               ignore_index: int = -100, reduction: str = "mean"
                               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Loss and both gradients of ``cross_entropy(input @ weight.T, target)`` in one call.

    Same values as ``torch.nn.functional.linear_cross_entropy(input, weight, target,
    ignore_index=ignore_index, reduction=reduction)`` followed by ``backward()`` with an upstream
    gradient of 1 per loss element, without ever materializing the ``(BT, V)`` logits: a forward
    pass computes each row's max and sum of exp block by block, then the memory-saving gradient
    recomputes the logits block by block (four GEMMs in all, oneDNN).

    Args:
        input: ``(BT, H)`` float16, bfloat16 or float32.
        weight: ``(V, H)`` same dtype.
        target: ``(BT,)`` int32/int64 in ``[0, V)`` or ``ignore_index`` (IndexError otherwise).
        ignore_index: rows with this target have loss 0 and zero gradient.
        reduction: ``"mean"`` (over non-ignored rows; NaN if there are none), ``"sum"`` or ``"none"``.

    Returns:
        ``(loss, grad_input, grad_weight)``: loss float32 (shape ``()``, or ``(BT,)`` for "none"),
        gradients in the input dtype.
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"fused_linear_cross_entropy: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    return tuple(_core.fused_linear_cross_entropy(input, weight, target, int(ignore_index), _REDUCTIONS[reduction]))
