"""Float64 AdamW reference, written from the vendor documents (aclnnApplyAdamWV2.md /
aclnnFusedAdamw.md formulas) with the vendor's step convention t = step + 1 and PyTorch's
decoupled weight decay (theta *= 1 - lr*wd before the moment update)."""

import ml_dtypes
import numpy as np

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


def adamw_step(p, g, m, v, vmax, step, *, lr, beta1, beta2, weight_decay, eps, amsgrad=False, maximize=False,
               gmul=1.0):
    """One step in float64; returns (p, m, v, vmax). Inputs may be any float dtype."""
    p, g, m, v = (np.asarray(a, np.float64) for a in (p, g, m, v))
    vmax = None if vmax is None else np.asarray(vmax, np.float64)
    t = float(step) + 1.0
    g = g * gmul
    if maximize:
        g = -g
    p = p * (1.0 - lr * weight_decay)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    vv = v
    if amsgrad:
        vmax = np.maximum(vmax, v)
        vv = vmax
    denom = np.sqrt(vv) / np.sqrt(1.0 - beta2 ** t) + eps
    p = p - lr / (1.0 - beta1 ** t) * m / denom
    return p, m, v, vmax


def clip_coefficient(grads, max_norm):
    """torch.nn.utils.clip_grad_norm_'s coefficient from the exact (float64) global norm."""
    norm = np.sqrt(sum(float(np.sum(np.asarray(g, np.float64) ** 2)) for g in grads))
    return norm, min(1.0, max_norm / (norm + 1e-6))
