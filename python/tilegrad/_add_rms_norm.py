"""Residual add fused into RMSNorm (``aclnnAddRmsNorm``) and tilegrad's fused backward."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_float

_FWD = "aclnnAddRmsNorm"


def add_rms_norm(x1: np.ndarray, x2: np.ndarray, gamma: np.ndarray, epsilon: float = 1e-6, *,
                 out: Optional[np.ndarray] = None, rstd_out: Optional[np.ndarray] = None,
                 x_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The residual add and the RMS normalisation after it, in one pass over the rows:
    ``x_out = x1 + x2`` (rounded to ``x1``'s dtype), ``rstd = 1 / sqrt(mean(x_out**2) + epsilon)``
    per row, ``y = (x_out * rstd) * gamma``.

    Same as CANN ``aclnnAddRmsNorm``; ``y`` and ``rstd`` equal :func:`rms_norm` of ``x_out`` bit for bit
    (the vendor's A2 kernels round ``x_out * rstd`` before the weight and, for bfloat16, normalise the
    unrounded sum: see the operator page).

    Args:
        x1: the residual stream, rank 1..8; float32, float16 or bfloat16.
        x2: the block's output added to it, ``x1``'s shape and dtype.
        gamma: weight spanning ``x1``'s trailing dims (``gamma.shape == x1.shape[-k:]``), ``x1``'s
            dtype.
        epsilon: added to the mean of squares, ``>= 0`` (default 1e-6, the vendor's).
        out: optional ``y`` (``x1``'s shape and dtype, any strides; may be ``x1`` or ``x2`` itself).
        rstd_out: optional float32 ``rstd`` of shape ``x1.shape[:-k] + (1,) * k``.
        x_out: optional sum (``x1``'s shape and dtype; may be ``x1`` or ``x2`` itself).

    Returns:
        ``(y, rstd, x_out)``. Arithmetic in float32, ``y`` rounded once. Empty ``x1``: nothing to
        compute. The GIL is released.
    """
    return tuple(_core.add_rms_norm(x1, x2, gamma, check_float(_FWD, "epsilon", epsilon), out, rstd_out, x_out))


def add_rms_norm_backward(dy: np.ndarray, x_out: np.ndarray, rstd: np.ndarray, gamma: np.ndarray,
                          dresidual: Optional[np.ndarray] = None, *, out: Optional[np.ndarray] = None,
                          dgamma_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Gradient of :func:`add_rms_norm` (the vendor has no backward operator): :func:`rms_norm_grad`
    of ``(dy, x_out, rstd, gamma)`` with ``dresidual`` added to ``dx`` in the same pass,
    ``dx = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd + dresidual``, ``xhat = x_out * rstd``.

    ``dx`` is the gradient of both ``x1`` and ``x2``. ``dresidual`` is the gradient reaching ``x_out``
    by the residual path (the next block's input); ``None`` means zero.

    Args:
        dy: gradient of ``y``, ``x_out``'s shape and dtype.
        x_out: the forward's ``x_out``; float32, float16 or bfloat16.
        rstd: the forward's float32 ``rstd`` (any shape equal to ``x_out``'s leading dims once size-1
            dims are dropped).
        gamma: the forward's weight.
        dresidual: optional gradient of ``x_out`` from the residual path, ``x_out``'s shape and dtype.
        out: optional ``dx`` (``x_out``'s shape and dtype; may be ``dy``, ``x_out`` or ``dresidual``
            itself).
        dgamma_out: optional float32 ``dgamma`` of ``gamma``'s shape (overwritten).

    Returns:
        ``(dx, dgamma)``: ``dx`` computed in float32 (``dresidual`` added before its one rounding);
        ``dgamma`` summed in a fixed order, bit-identical for every thread count; with no rows it is
        NaN, as :func:`rms_norm_grad`'s. The GIL is released.
    """
    return tuple(_core.add_rms_norm_backward(dy, x_out, rstd, gamma, dresidual, out, dgamma_out))
