"""GELU forward and backward (``aclnnGeluV2``, ``aclnnGeluBackwardV2``; ``aclnnGelu`` /
``aclnnGeluBackward`` are the ``approximate="tanh"`` case)."""

from typing import Optional

import numpy as np

from . import _core
from ._args import check_str

_FWD, _BWD = "aclnnGeluV2", "aclnnGeluBackwardV2"


def gelu(x: np.ndarray, approximate: str = "none", *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """GELU: ``x * Phi(x)`` (``approximate="none"``, Phi the standard normal CDF) or its tanh
    approximation ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (``"tanh"``).

    Same as CANN ``aclnnGeluV2`` (``aclnnGelu`` is the tanh form) and ``F.gelu(x, approximate=...)``
    in PyTorch (whose default is also ``"none"``).

    Args:
        x: float32, float16 or bfloat16, rank 0..8, any strides.
        approximate: ``"none"`` (erf) or ``"tanh"``.
        out: optional result (``x``'s dtype and shape, any strides; may be ``x`` itself).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, rounded once. GIL released.
    """
    return _core.gelu(x, check_str(_FWD, "approximate", approximate), out)


def gelu_backward(grad_output: np.ndarray, input: np.ndarray, approximate: str = "none", *,
                  out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of :func:`gelu`: ``grad_output * gelu'(input)``, with
    ``gelu'(x) = Phi(x) + x * phi(x)`` (``"none"``) or the derivative of the tanh form (``"tanh"``).

    Same as CANN ``aclnnGeluBackwardV2`` and ``torch.ops.aten.gelu_backward(grad_output, input,
    approximate=...)``.

    Args:
        grad_output, input: float32, float16 or bfloat16, shapes that broadcast (NumPy rules), rank <= 8.
        approximate: ``"none"`` (erf) or ``"tanh"``; the forward's.
        out: optional result: the broadcast shape; the inputs' dtype when they agree, else float32.
            It may be either input itself (same dtype and layout).

    Returns:
        ``out``, or a new C-contiguous array. float32 arithmetic, rounded once. GIL released.
    """
    return _core.gelu_backward(grad_output, input, check_str(_BWD, "approximate", approximate), out)
