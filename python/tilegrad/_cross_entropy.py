"""Cross entropy (``aclnnCrossEntropyLoss``) and its gradient (``aclnnCrossEntropyLossGrad``)."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_bool, check_float, check_int

_FWD = "aclnnCrossEntropyLoss"
_GRAD = "aclnnCrossEntropyLossGrad"


def cross_entropy_loss(input: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray] = None,
                       reduction: str = "mean", ignore_index: int = -100, label_smoothing: float = 0.0,
                       lse_square_scale_for_zloss: float = 0.0, return_zloss: bool = False, *,
                       out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
    """Log-softmax and (weighted, label-smoothed, z-loss) cross entropy of class-index targets.

    With ``lse_i = log sum_c exp(x_ic)``, ``log_prob = x - lse``, ``m_i = (t_i != ignore_index)``
    (for any sign of ``ignore_index``), ``w`` = weight or ones, ``ls = label_smoothing`` and
    ``z = lse_square_scale_for_zloss``::

        l_i = m_i * [(1-ls) * (-w[t_i] * log_prob[i, t_i]) + (ls/C) * (-sum_c w_c * log_prob[i, c])]
              + m_i * z * lse_i**2

    ``reduction="none"`` gives ``l`` (N,); ``"sum"`` gives ``sum_i l_i``; ``"mean"`` divides the
    cross-entropy part by ``D = sum_i w[t_i] * m_i`` and the z part by ``sum_i m_i`` (0/0 = NaN
    when every row is ignored, as PyTorch).

    Same as ``torch.nn.functional.cross_entropy(x, t, weight, ignore_index=..., reduction=...,
    label_smoothing=...)`` (plus the z-loss of the common large-model recipes) and CANN
    ``aclnnCrossEntropyLoss`` (whose label smoothing and z-loss the vendor ignores).

    Args:
        input: logits ``x`` (N, C); float32, float16 or bfloat16; any strides.
        target: class indices (N,); int64 or int32. A target outside ``[0, C)`` that is not
            ``ignore_index`` raises ``IndexError`` naming the (lowest) row and value.
        weight: optional per-class weights (C,), float32.
        reduction: ``"none"``, ``"mean"`` or ``"sum"`` (a str; anything else is TypeError/ValueError).
        ignore_index: target value whose rows are masked out (an int or NumPy integer in int64).
        label_smoothing: in ``[0, 1]``.
        lse_square_scale_for_zloss: z-loss scale ``z`` (0 disables it).
        return_zloss: also return ``zloss`` (the z-terms alone, reduced like the loss) and
            ``lse`` (N,), the log-sum-exp per row that ``cross_entropy_loss_grad`` takes.
        out: optional array (N, C) of ``input``'s dtype (any strides) that receives ``log_prob``.

    Returns:
        ``(loss, log_prob, zloss, lse)``, all of ``input``'s dtype; ``loss`` and ``zloss`` are 0-d
        for mean/sum, (N,) for none; ``zloss`` and ``lse`` are None unless ``return_zloss``.

    Numerically stable (max, then sum of exp, per row; rows longer than L2 are processed in
    chunks); accumulations in float32/float64, each output rounded once. The GIL is released.
    """
    return tuple(_core.cross_entropy_loss(input, target, weight, reduction,
                                          check_int(_FWD, "ignore_index", ignore_index),
                                          check_float(_FWD, "label_smoothing", label_smoothing),
                                          check_float(_FWD, "lse_square_scale_for_zloss", lse_square_scale_for_zloss),
                                          check_bool(_FWD, "return_zloss", return_zloss), out))


def _is_number(value) -> bool:
    """A Python or NumPy scalar (not an array, not a bool)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def cross_entropy_loss_grad(grad_loss, log_prob: np.ndarray, target: np.ndarray,
                            weight: Optional[np.ndarray] = None, grad_zloss=None,
                            lse_for_zloss: Optional[np.ndarray] = None, reduction: str = "mean",
                            ignore_index: int = -100, label_smoothing: float = 0.0,
                            lse_square_scale_for_zloss: float = 0.0, *,
                            out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of :func:`cross_entropy_loss` w.r.t. its input, from the forward's ``log_prob``.

    With ``p = exp(log_prob)``, ``g`` = grad_loss (per row for none), ``Dm`` = the mean divisor
    ``D`` (1 for none/sum), ``a_i = g_i (1-ls) m_i / Dm``, ``b_i = g_i (ls/C) m_i / Dm``::

        x_grad[i, j] = a_i w[t_i] (p_ij - [j == t_i]) + b_i (p_ij sum_c w_c - w_j)
                       + p_ij * 2 z lse_i m_i (g_i + gz_i) / Dz      (when z != 0 and lse_for_zloss given)

    ``gz`` = grad_zloss or 0, ``Dz = sum_i m_i`` for mean, else 1. Ignored rows are zero (so mean
    with every row ignored gives zeros, as PyTorch); D = 0 with rows kept gives NaN (as PyTorch).

    Same as ``torch.ops.aten._log_softmax_backward_data(nll_loss_backward(...), log_prob, 1, dtype)``
    (plus label smoothing and z-loss) and CANN ``aclnnCrossEntropyLossGrad``.

    Args:
        grad_loss: upstream gradient of the loss: (N,) for none, 0-d or (1,) for mean/sum (a Python
            or NumPy scalar is accepted and converted to a 0-d array of ``log_prob``'s dtype).
        log_prob: (N, C) float32, float16 or bfloat16; any strides.
        target: (N,) int64 or int32; out of range (and not ``ignore_index``) raises ``IndexError``.
        weight: optional (C,) float32 class weights.
        grad_zloss: optional upstream gradient of ``zloss`` (shaped like ``grad_loss``).
        lse_for_zloss: optional (N,) log-sum-exp from the forward (needed for the z-loss term).
        reduction, ignore_index, label_smoothing, lse_square_scale_for_zloss: as the forward's.
        out: optional result (N, C) of ``log_prob``'s dtype (any strides; may be ``log_prob`` itself).

    Returns:
        ``out``, or a new C-contiguous array.

    One fused pass: each ``log_prob`` element read once, each output element written once; the
    true-class term enters the same fp32 fma as ``p`` (no bf16 ``p - 1`` cancellation); the mean
    divisor is summed in row order, so results do not depend on the thread count.
    """
    if isinstance(log_prob, np.ndarray):
        if _is_number(grad_loss):
            grad_loss = np.asarray(grad_loss, dtype=log_prob.dtype)
        if _is_number(grad_zloss):
            grad_zloss = np.asarray(grad_zloss, dtype=log_prob.dtype)
    return _core.cross_entropy_loss_grad(grad_loss, log_prob, target, weight, grad_zloss, lse_for_zloss,
                                         reduction,
                                         check_int(_GRAD, "ignore_index", ignore_index),
                                         check_float(_GRAD, "label_smoothing", label_smoothing),
                                         check_float(_GRAD, "lse_square_scale_for_zloss", lse_square_scale_for_zloss),
                                         out)
