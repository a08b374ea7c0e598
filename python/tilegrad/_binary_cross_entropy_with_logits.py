"""Binary cross entropy with logits, the forward loss and its gradient
(``aclnnBinaryCrossEntropyWithLogits``, ``aclnnBinaryCrossEntropyWithLogitsBackward``)."""

from typing import Optional, Tuple, Union

import numpy as np

from . import _core
from ._args import as_operand


def _operands(input, target, *broadcast) -> Tuple:
    """(input, target, *broadcast) with Python / NumPy scalars as 0-d arrays of input's dtype: where a
    0-d array is accepted (the broadcast operands; input and target when the other is 0-d)."""
    like = input if isinstance(input, np.ndarray) else target
    return (as_operand(input, target), as_operand(target, input), *(as_operand(a, like) for a in broadcast))


def binary_cross_entropy_with_logits(input: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray] = None,
                                     pos_weight: Optional[np.ndarray] = None, reduction: Union[str, int] = "mean",
                                     *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Binary cross entropy between the logits ``input`` and ``target``, in one fused pass.

    Per element, with ``weight`` and ``pos_weight`` broadcast to ``input.shape`` (missing: ones)::

        loss = -weight * (pos_weight * target * log(sigmoid(input))
                          + (1 - target) * log(1 - sigmoid(input)))

    then ``"none"`` (0) returns ``loss``, ``"mean"`` (1) its mean over ``input.size`` and ``"sum"`` (2)
    its sum. Same as ``torch.nn.functional.binary_cross_entropy_with_logits(input, target, weight,
    reduction=reduction, pos_weight=pos_weight)`` and CANN ``aclnnBinaryCrossEntropyWithLogits``.

    Args:
        input: the logits ``x``.
        target: labels, usually in [0, 1]; same shape as ``input``. Here and for ``weight`` /
            ``pos_weight``, a Python or NumPy scalar is accepted as a 0-d array of ``input``'s dtype.
        weight: optional per-element rescaling weight; broadcasts to ``input.shape``.
        pos_weight: optional weight of positive examples; broadcasts to ``input.shape`` (typically
            one value per class, shape ``(C,)``).
        reduction: ``"none"``, ``"mean"``, ``"sum"`` or the aclnn codes 0, 1, 2.
        out: optional result array of ``target``'s dtype: ``input``'s shape for ``"none"`` (any
            strides; may be ``input`` or ``target`` itself, same dtype and layout, for an in-place
            update), else one element (shape ``()`` or ``(1,)``).

    Returns:
        ``out``, or a new array of ``target``'s dtype: C-contiguous of ``input``'s shape for
        ``"none"``, 0-d for ``"mean"`` / ``"sum"`` (an empty ``input`` gives NaN / 0).

    Dtypes float32, float16, bfloat16 in any mix; every operand is widened to float32, all math is
    float32 and each result is rounded once. Stable for logits of any magnitude (computed as
    ``(x >= 0 ? (1 - t) * x : -pw * t * x) + (1 - t + pw * t) * log1p(exp(-|x|))``, no term cancels).
    ``"mean"`` / ``"sum"`` add the losses in fixed blocks, then the blocks in order: the same bits
    for any thread count. The GIL is released while the kernel runs.
    """
    input, target, weight, pos_weight = _operands(input, target, weight, pos_weight)
    return _core.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction, out)


def binary_cross_entropy_with_logits_backward(grad_output: np.ndarray, input: np.ndarray, target: np.ndarray,
                                              weight: Optional[np.ndarray] = None,
                                              pos_weight: Optional[np.ndarray] = None,
                                              reduction: Union[str, int] = "mean", *,
                                              out: Optional[np.ndarray] = None) -> np.ndarray:
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
    input, target, grad_output, weight, pos_weight = _operands(input, target, grad_output, weight, pos_weight)
    return _core.binary_cross_entropy_with_logits_backward(grad_output, input, target, weight, pos_weight,
                                                           reduction, out)
