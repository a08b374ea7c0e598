"""GeGLU forward and backward (``aclnnGeGluV3``, ``aclnnGeGluV3Backward``)."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_bool, check_int, check_str

_FWD, _BWD = "aclnnGeGluV3", "aclnnGeGluV3Backward"


def ge_glu(x: np.ndarray, dim: int = -1, approximate: str = "tanh", activate_left: bool = False, *,
           out: Optional[np.ndarray] = None, out_gelu: Optional[np.ndarray] = None
           ) -> Tuple[np.ndarray, np.ndarray]:
    """GeGLU: ``a, b = split(x, 2, dim)``; ``out = gelu(a) * b`` when ``activate_left``, else
    ``out = a * gelu(b)``; ``out_gelu`` is the gelu of the activated half (what
    :func:`ge_glu_backward` needs).

    Same as CANN ``aclnnGeGluV3`` (defaults as its operator: ``dim=-1``, tanh, the right half
    activated). Gemma's MLP, ``gelu_pytorch_tanh(gate) * up`` with the projection laid out
    ``[gate | up]``, is ``ge_glu(x, -1, "tanh", activate_left=True)``.

    Args:
        x: float32, float16 or bfloat16, rank 1..8, ``x.shape[dim]`` even.
        dim: the split dimension, in ``[-x.ndim, x.ndim)``.
        approximate: ``"none"`` (erf) or ``"tanh"``.
        activate_left: activate the first half (True) or the second (False).
        out, out_gelu: optional results (``x``'s dtype, shape of ``x`` with ``dim`` halved, any strides).

    Returns:
        ``(out, out_gelu)``. float32 arithmetic, each element rounded once. GIL released.
    """
    return _core.ge_glu(x, check_int(_FWD, "dim", dim), check_str(_FWD, "approximate", approximate),
                        check_bool(_FWD, "activate_left", activate_left), out, out_gelu)


def ge_glu_backward(grad_output: np.ndarray, x: np.ndarray, gelu: np.ndarray, dim: int = -1,
                    approximate: str = "tanh", activate_left: bool = False, *,
                    out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of :func:`ge_glu`: with ``h`` the activated half of ``x`` and ``l`` the other,
    ``out`` holds ``grad_output * l * gelu'(h)`` in ``h``'s place and ``grad_output * gelu`` in
    ``l``'s.

    Same as CANN ``aclnnGeGluV3Backward``; the gradient autograd gives for the forward's formula.

    Args:
        grad_output: upstream gradient (``x``'s dtype, shape of ``x`` with ``dim`` halved).
        x: the forward input.
        gelu: the forward's ``out_gelu`` (used as given for the linear half).
        dim, approximate, activate_left: the forward's.
        out: optional result (``x``'s dtype and shape, any strides; may be ``x`` itself).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, each element rounded once.
    """
    return _core.ge_glu_backward(grad_output, x, gelu, check_int(_BWD, "dim", dim),
                                 check_str(_BWD, "approximate", approximate),
                                 check_bool(_BWD, "activate_left", activate_left), out)


def gelu_mul(gate: np.ndarray, up: np.ndarray, approximate: str = "tanh", *,
             out: Optional[np.ndarray] = None) -> np.ndarray:
    """``out = gelu(gate) * up`` on two arrays: :func:`ge_glu`'s formula (gate activated) where the two
    halves are separate arrays, how a Gemma MLP combines its gate and up projections
    (``F.gelu(gate, approximate="tanh") * up`` in PyTorch). tilegrad's own operator (no aclnn name).

    Args:
        gate, up: one dtype (float32, float16 or bfloat16) and one shape; any strides.
        approximate: ``"tanh"`` (Gemma's ``gelu_pytorch_tanh``, the default) or ``"none"`` (erf).
        out: optional result (that dtype and shape, any strides; may be ``gate`` or ``up`` itself).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, rounded once. GIL released.
    """
    return _core.gelu_mul(gate, up, check_str("gelu_mul", "approximate", approximate), out)


def gelu_mul_backward(grad_output: np.ndarray, gate: np.ndarray, up: np.ndarray, approximate: str = "tanh", *,
                      out: Optional[Tuple[Optional[np.ndarray], Optional[np.ndarray]]] = None
                      ) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of :func:`gelu_mul`: ``grad_gate = grad_output * up * gelu'(gate)`` and
    ``grad_up = grad_output * gelu(gate)``, gelu recomputed from ``gate`` (nothing else is saved).

    Args:
        grad_output, gate, up: one dtype and one shape.
        approximate: the forward's (``"tanh"`` or ``"none"``).
        out: optional ``(grad_gate, grad_up)``, each None (allocated) or an array of that dtype and
            shape (any strides; each may be an input itself, never the other gradient).

    Returns:
        ``(grad_gate, grad_up)``. float32 arithmetic, each element rounded once. GIL released.
    """
    grad_gate, grad_up = out if out is not None else (None, None)
    return _core.gelu_mul_backward(grad_output, gate, up, check_str("gelu_mul_backward", "approximate", approximate),
                                   grad_gate, grad_up)
