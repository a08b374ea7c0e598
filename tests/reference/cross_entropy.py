"""Float64 NumPy reference of cross entropy with class weights, ignore_index, label smoothing and z-loss,
forward and input gradient, written from the formula (SEMANTICS / tilegrad.cross_entropy_loss):

    lse_i = log sum_c exp(x_ic),  logp = x - lse,  m_i = (t_i != ignore_index),  w = weight or ones
    ce_i  = m_i [(1 - ls) (-w[t_i] logp[i, t_i]) + (ls / C) (-sum_c w_c logp[i, c])]
    z_i   = m_i * z * lse_i**2
    "none": ce + z, z;   "sum": sums;   "mean": sum(ce) / sum_i m_i w[t_i] + sum(z) / sum_i m_i
"""

from typing import Optional, Tuple

import numpy as np


def _log_softmax(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    shift = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - shift).sum(axis=1)) + shift[:, 0]
    return x - lse[:, None], lse


def cross_entropy_with_zloss(x: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray] = None,
                             ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0,
                             z_loss_scale: float = 0.0, grad_loss=1.0, grad_zloss=0.0
                             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(loss, zloss, grad_x)`` in float64 for (N, C) logits ``x`` and class targets (N,).

    ``loss`` includes the z term; ``zloss`` is the z term alone, reduced like the loss. ``grad_x`` is
    d(sum(grad_loss * loss) + sum(grad_zloss * zloss)) / dx (grad_* per row for "none", scalars else).
    """
    x = np.asarray(x, dtype=np.float64)
    n, c = x.shape
    w = np.ones(c) if weight is None else np.asarray(weight, dtype=np.float64)
    kept = target != ignore_index
    safe_t = np.where(kept, target, 0)
    logp, lse = _log_softmax(x)
    p = np.exp(logp)
    rows = np.arange(n)
    nll = -w[safe_t] * logp[rows, safe_t]
    smooth = -(logp * w[None, :]).sum(axis=1)
    ce = kept * ((1 - label_smoothing) * nll + (label_smoothing / c) * smooth)
    z = kept * z_loss_scale * lse ** 2

    ce_divisor = (kept * w[safe_t]).sum() if reduction == "mean" else 1.0
    z_divisor = kept.sum() if reduction == "mean" else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        if reduction == "none":
            loss, zloss = ce + z, z
        else:
            loss = ce.sum() / ce_divisor + z.sum() / z_divisor
            zloss = z.sum() / z_divisor

    g = np.broadcast_to(np.asarray(grad_loss, dtype=np.float64), (n,))
    gz = np.broadcast_to(np.asarray(grad_zloss, dtype=np.float64), (n,))
    onehot = np.zeros_like(x)
    onehot[rows, safe_t] = 1.0
    # d nll_i / dx = w[t_i] (p - onehot);  d smooth_i / dx = p sum_c w_c - w;  d z_i / dx = 2 z lse_i p
    d_ce = (1 - label_smoothing) * w[safe_t][:, None] * (p - onehot) \
        + (label_smoothing / c) * (p * w.sum() - w[None, :])
    d_z = 2 * z_loss_scale * lse[:, None] * p
    with np.errstate(invalid="ignore", divide="ignore"):
        grad = g[:, None] * d_ce / ce_divisor + (g + gz)[:, None] * d_z / z_divisor
    grad = np.where(kept[:, None], grad, 0.0)  # ignored rows: zero even when a divisor is 0
    return np.asarray(loss), np.asarray(zloss), grad
