"""RMSNorm forward and backward (``aclnnRmsNorm``, ``aclnnRmsNormGrad``)."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_float

_FWD = "aclnnRmsNorm"


def rms_norm(x: np.ndarray, gamma: np.ndarray, epsilon: float = 1e-6, *, weight_offset: float = 0.0,
             out: Optional[np.ndarray] = None,
             rstd_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """RMS normalisation over ``gamma``'s dims: ``y = (x * rstd) * gamma``,
    ``rstd = 1 / sqrt(mean(x**2) + epsilon)`` per row.

    Same as CANN ``aclnnRmsNorm`` and ``torch.nn.functional.rms_norm(x, gamma.shape, gamma, epsilon)``
    (which rounds ``x * rstd`` to the input dtype before the weight; this rounds once).

    Args:
        x: input, rank 1..8; float32, float16 or bfloat16.
        gamma: weight spanning ``x``'s trailing dims (``gamma.shape == x.shape[-k:]``); ``x``'s dtype,
            or float32 when ``x`` is float16 / bfloat16.
        epsilon: added to the mean of squares, ``>= 0`` (default 1e-6, the vendor's).
        weight_offset: added to ``gamma`` in float32 after widening: ``1.0`` is Gemma's
            ``y = (x * rstd) * (1 + gamma)`` (CANN ``aclnnGemmaRmsNorm``); 0.0, the default,
            ``aclnnRmsNorm``. Finite.
        out: optional ``y`` (``x``'s shape and dtype, any strides; may be ``x`` itself).
        rstd_out: optional float32 ``rstd`` of shape ``x.shape[:-k] + (1,) * k``.

    Returns:
        ``(y, rstd)``. Arithmetic in float32, ``y`` rounded once. The GIL is released.
    """
    return tuple(_core.rms_norm(x, gamma, check_float(_FWD, "epsilon", epsilon), out, rstd_out,
                                check_float(_FWD, "weight_offset", weight_offset)))


def rms_norm_grad(dy: np.ndarray, x: np.ndarray, rstd: np.ndarray, gamma: np.ndarray, *,
                  weight_offset: float = 0.0, out: Optional[np.ndarray] = None,
                  dgamma_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Gradient of :func:`rms_norm` given the forward's ``rstd``:
    ``dx = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd`` with ``xhat = x * rstd``, and
    ``dgamma = sum over rows of dy * xhat`` (float32).

    Same as CANN ``aclnnRmsNormGrad``; the gradients of ``torch.nn.functional.rms_norm``.

    Args:
        dy: upstream gradient, ``x``'s shape and dtype.
        x: the forward input; float32, float16 or bfloat16.
        rstd: the forward's float32 ``rstd`` (any shape equal to ``x``'s leading dims once size-1
            dims are dropped).
        gamma: the forward's weight.
        weight_offset: the forward's (``dx`` uses ``gamma + weight_offset``; ``dgamma`` does not
            depend on it). With 1.0 this is the gradient of Gemma's RMSNorm, which CANN has no
            operator for (tilegrad's own).
        out: optional ``dx`` (``x``'s shape and dtype, any strides; may be ``dy`` or ``x`` itself).
        dgamma_out: optional float32 ``dgamma`` of ``gamma``'s shape (overwritten).

    Returns:
        ``(dx, dgamma)``. ``dgamma`` is summed in a fixed order (row blocks of a size fixed by the
        shape, then the blocks in order), so it is bit-identical for every thread count. With no
        rows, ``dgamma`` is NaN (the vendor's behaviour), not zero. The GIL is released.
    """
    return tuple(_core.rms_norm_grad(dy, x, rstd, gamma, out, dgamma_out,
                                     check_float("aclnnRmsNormGrad", "weight_offset", weight_offset)))
