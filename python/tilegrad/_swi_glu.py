"""SwiGLU forward and backward (``aclnnSwiGlu``, ``aclnnSwiGluGrad``)."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_int

_FWD, _BWD = "aclnnSwiGlu", "aclnnSwiGluGrad"


def swi_glu(x: np.ndarray, dim: int = -1, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """SwiGLU: ``a, b = split(x, 2, dim)``; ``out = silu(a) * b`` (the first half is the gate).

    Same as CANN ``aclnnSwiGlu`` and ``a, b = x.chunk(2, dim); F.silu(a) * b`` in PyTorch (Llama's
    ``silu(gate) * up`` with the projection laid out ``[gate | up]``).

    Args:
        x: float32, float16 or bfloat16, rank 1..8, ``x.shape[dim]`` even.
        dim: the split dimension, in ``[-x.ndim, x.ndim)`` (default -1).
        out: optional result (``x``'s dtype, shape of ``x`` with ``dim`` halved, any strides).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, rounded once. GIL released.
    """
    return _core.swi_glu(x, check_int(_FWD, "dim", dim), out)


def swi_glu_grad(y_grad: np.ndarray, x: np.ndarray, dim: int = -1, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of :func:`swi_glu`: ``out = concatenate([da, db], dim)`` with ``s = sigmoid(a)``,
    ``da = y_grad * b * s * (1 + a * (1 - s))`` and ``db = y_grad * a * s``.

    Same as CANN ``aclnnSwiGluGrad``; the gradient autograd gives for ``F.silu(a) * b``.

    Args:
        y_grad: upstream gradient (``x``'s dtype, shape of ``x`` with ``dim`` halved).
        x: the forward input.
        dim: the forward's split dimension (default -1).
        out: optional result (``x``'s dtype and shape, any strides; may be ``x`` itself).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, each element rounded once.
    """
    return _core.swi_glu_grad(y_grad, x, check_int(_BWD, "dim", dim), out)


def silu_mul(gate: np.ndarray, up: np.ndarray, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``out = silu(gate) * up`` on two arrays: :func:`swi_glu`'s formula where the two halves are
    separate arrays (a Llama MLP's gate and up projections), with the same kernels.

    Args:
        gate, up: one dtype (float32, float16 or bfloat16) and one shape; any strides.
        out: optional result (that dtype and shape, any strides; may be ``gate`` or ``up`` itself).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, rounded once. GIL released.
    """
    return _core.silu_mul(gate, up, out)


def silu_mul_grad(dy: np.ndarray, gate: np.ndarray, up: np.ndarray, *,
                  out: Optional[Tuple[Optional[np.ndarray], Optional[np.ndarray]]] = None
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of :func:`silu_mul`: with ``s = sigmoid(gate)``,
    ``d_gate = dy * up * s * (1 + gate * (1 - s))`` and ``d_up = dy * gate * s``.

    Args:
        dy, gate, up: one dtype and one shape.
        out: optional ``(d_gate, d_up)``, each None (allocated) or an array of that dtype and shape.

    Returns:
        ``(d_gate, d_up)``. float32 arithmetic, each element rounded once. GIL released.
    """
    d_gate, d_up = out if out is not None else (None, None)
    return _core.silu_mul_grad(dy, gate, up, d_gate, d_up)
