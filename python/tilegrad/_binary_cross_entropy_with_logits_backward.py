"""Binary cross entropy with logits backward (``aclnnBinaryCrossEntropyWithLogitsBackward``)."""

from typing import Optional, Union

import numpy as np

from . import _core
from ._args import as_operand


def binary_cross_entropy_with_logits_backward(
    grad_output: np.ndarray,
    input: np.ndarray,
    target: np.ndarray,
    weight: Optional[np.ndarray] = None,
    pos_weight: Optional[np.ndarray] = None,
    reduction: Union[str, int] = "mean",
    *,
    out: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Gradient of ``binary_cross_entropy_with_logits`` with respect to its logits ``input``.

    Per element, with every operand broadcast to ``input.shape`` and ``s = sigmoid(input)``::

        pt = pos_weight * target
        g  = (pt + 1 - target) * s - pt        # g = s - target without pos_weight
        grad_input = g * grad_output * weight * scale

    ``scale = 1 / max(1, input.size)`` for ``reduction="mean"`` (1), else 1 (``"none"`` 0, ``"sum"`` 2).
    Same as ``torch.autograd.grad(F.binary_cross_entropy_with_logits(input, target, weight,
    reduction=reduction, pos_weight=pos_weight), input, grad_output)`` and CANN
    ``aclnnBinaryCrossEntropyWithLogitsBackward``.

    Args:
        grad_output: upstream gradient; broadcasts (NumPy rules) to ``input.shape`` (a 0-d array
            for ``"mean"``/``"sum"``, ``input``'s shape for ``"none"``). Here and for every other
            operand, a Python or NumPy scalar is accepted as a 0-d array of ``input``'s dtype.
        input: the logits ``x``.
        target: labels, usually in [0, 1]; same shape as ``input``.
        weight: optional per-element rescaling weight; broadcasts to ``input.shape``.
        pos_weight: optional weight of positive examples; broadcasts to ``input.shape`` (typically
            one value per class, shape ``(C,)``).
        reduction: ``"none"``, ``"mean"``, ``"sum"`` or the aclnn codes 0, 1, 2.
        out: optional result array of ``input``'s shape and ``target``'s dtype (any strides; may
            be one of the inputs of the same dtype and layout for an in-place update).

    Returns:
        ``out``, or a new C-contiguous array of ``input``'s shape and ``target``'s dtype.

    Dtypes float32, float16, bfloat16 in any mix; every operand is widened to float32, all math is
    float32 and each result is rounded once. Stable for logits of any magnitude: ``g`` is computed as
    ``(1 - target) * s - pt * (1 - s)`` with ``1 - s`` taken without cancellation. One pass: each
    input element is read once and each output element written once. The GIL is released while the
    kernel runs.
    """
    # Scalars wherever a 0-d array is accepted (grad_output, weight, pos_weight broadcast; input and
    # target when the other is 0-d), as arrays of input's dtype.
    like = input if isinstance(input, np.ndarray) else target
    grad_output, weight, pos_weight = (as_operand(a, like) for a in (grad_output, weight, pos_weight))
    input, target = as_operand(input, target), as_operand(target, input)
    return _core.binary_cross_entropy_with_logits_backward(grad_output, input, target, weight, pos_weight,
                                                           reduction, out)
