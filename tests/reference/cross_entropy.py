"""Float64 NumPy reference of cross entropy with class weights, ignore_index, label smoothing and z-loss,
forward and input gradient, written from the formula (specification section 3 / tilegrad.cross_entropy_loss):

    lse_i = log sum_c exp(x_ic),  logp = x - lse,  m_i = (t_i != ignore_index),  w = weight or ones
    ce_i  = m_i [(1 - ls) (-w[t_i] logp[i, t_i]) + (ls / C) (-sum_c w_c logp[i, c])]
    z_i   = m_i * z * lse_i**2
    "none": ce + z, z;   "sum": sums;   "mean": sum(ce) / sum_i m_i w[t_i] + sum(z) / sum_i m_i

``cross_entropy_loss`` is the forward (aclnnCrossEntropyLoss), ``cross_entropy_loss_grad`` its exact
vector-Jacobian product from a given (possibly rounded) log_prob (aclnnCrossEntropyLossGrad), and
``cross_entropy_with_zloss`` both at once from the logits (for the tilegrad.torch tests).
"""

from typing import Optional, Tuple

import numpy as np


def log_softmax(x) -> Tuple[np.ndarray, np.ndarray]:
    """``(log_prob, lse)`` in float64 of (N, C) logits; C = 0 gives lse = -inf."""
    x = np.asarray(x, np.float64)
    if x.shape[1] == 0:
        return x.copy(), np.full(x.shape[0], -np.inf)
    mx = x.max(axis=1)
    lse = mx + np.log(np.exp(x - mx[:, None]).sum(axis=1))
    return x - lse[:, None], lse


def cross_entropy_loss(x, target, weight, reduction, ignore_index, ls, z):
    """``(loss, log_prob, zloss, lse)`` in float64; loss includes the z-terms, zloss is them alone."""
    x = np.asarray(x, np.float64)
    n, c = x.shape
    lp, lse = log_softmax(x)
    m = np.asarray(target) != ignore_index
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    tt = np.where(m, target, 0).astype(np.int64)
    rows = np.arange(n)
    wt = w[tt] if c else np.zeros(n)
    ce = np.zeros(n)
    if c:
        ce = (1 - ls) * (-wt * lp[rows, tt])
        if ls > 0:
            ce = ce + (ls / c) * (-(lp * w).sum(axis=1))
    ce = np.where(m, ce, 0.0)
    zt = np.where(m, z * lse**2, 0.0) if z != 0 else np.zeros(n)
    if reduction == "none":
        return ce + zt, lp, zt, lse
    if reduction == "sum":
        return np.float64(ce.sum() + zt.sum()), lp, np.float64(zt.sum()), lse
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (wt * m).sum()
        dz = m.sum()
        loss = ce.sum() / d + (zt.sum() / dz if z != 0 else 0.0)
        return np.float64(loss), lp, np.float64(zt.sum() / dz), lse


def cross_entropy_loss_grad(grad_loss, log_prob, target, weight, grad_zloss, lse, reduction, ignore_index, ls, z):
    """The vector-Jacobian product of ``cross_entropy_loss`` w.r.t. x, from (rounded) log_prob, in float64.

    ``grad_loss`` / ``grad_zloss`` are per row for "none", scalars (0-d or (1,)) otherwise; the z-term
    needs ``lse`` (None: no z-term, as the operator without lseForZlossOptional)."""
    lp = np.asarray(log_prob, np.float64)
    n, c = lp.shape
    p = np.exp(lp)
    m = (np.asarray(target) != ignore_index).astype(np.float64)
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    tt = np.where(m > 0, target, 0).astype(np.int64)
    g = np.asarray(grad_loss, np.float64).reshape(-1)
    g = g if reduction == "none" else np.full(n, g[0])
    gz = np.zeros(n) if grad_zloss is None else np.asarray(grad_zloss, np.float64).reshape(-1)
    gz = gz if reduction == "none" or grad_zloss is None else np.full(n, gz[0])
    d = dz = 1.0
    if reduction == "mean":
        d = (w[tt] * m).sum()
        dz = m.sum()
    onehot = np.zeros((n, c))
    onehot[np.arange(n), tt] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = (g * (1 - ls) / d * w[tt])[:, None] * (p - onehot)
        if ls > 0:
            dx = dx + (g * (ls / c) / d)[:, None] * (p * w.sum() - w[None, :])
        if z != 0 and lse is not None:
            dx = dx + p * (2 * z * np.asarray(lse, np.float64) * (g + gz) / dz)[:, None]
    return np.where(m[:, None] > 0, dx, 0.0)


def cross_entropy_with_zloss(x: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray] = None,
                             ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0,
                             z_loss_scale: float = 0.0, grad_loss=1.0, grad_zloss=0.0
                             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(loss, zloss, grad_x)`` in float64 for (N, C) logits ``x`` and class targets (N,).

    ``loss`` includes the z term; ``zloss`` is the z term alone, reduced like the loss. ``grad_x`` is
    d(sum(grad_loss * loss) + sum(grad_zloss * zloss)) / dx (grad_* per row for "none", scalars else),
    from the exact log_prob and lse.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    loss, log_prob, zloss, lse = cross_entropy_loss(x, target, weight, reduction, ignore_index, label_smoothing,
                                                    z_loss_scale)
    shape = (n,) if reduction == "none" else ()
    g = np.broadcast_to(np.asarray(grad_loss, np.float64), shape)
    gz = np.broadcast_to(np.asarray(grad_zloss, np.float64), shape)
    grad = cross_entropy_loss_grad(g, log_prob, target, weight, gz, lse, reduction, ignore_index, label_smoothing,
                                   z_loss_scale)
    return np.asarray(loss), np.asarray(zloss), grad
