"""SiLU backward (``aclnnSiluBackward``)."""

from typing import Optional

import numpy as np

from . import _core
from ._args import as_operand


def silu_backward(grad_output: np.ndarray, input: np.ndarray, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of SiLU: ``grad_input = grad_output * s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``.

    Same as ``torch.ops.aten.silu_backward(grad_output, input)`` and CANN ``aclnnSiluBackward``.

    Args:
        grad_output: upstream gradient ``dy``; float32, float16 or bfloat16.
        input: the forward input ``x``; float32, float16 or bfloat16. ``grad_output`` and
            ``input`` broadcast (NumPy rules) to the result's shape. A Python or NumPy scalar is
            accepted as a 0-d array of the other operand's dtype (float32 if both are scalars).
        out: optional result array (any strides; may be ``grad_output`` or ``input`` itself for an
            in-place update). Its dtype must equal the inputs' when they share one, else float32.

    Returns:
        ``out``, or a new C-contiguous array of the broadcast shape.

    Computed in float32 and rounded once. Finite ``x`` of any magnitude gives a finite result
    (``x = -1e4`` gives ``-0``, ``x = 1e4`` gives ``dy``); ``x = +-inf`` or NaN gives NaN.
    The GIL is released while the kernel runs.
    """
    grad_output, input = as_operand(grad_output, input), as_operand(input, grad_output)
    return _core.silu_backward(grad_output, input, out)
