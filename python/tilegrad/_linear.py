"""Linear layer forward and backward (PyTorch's ``F.linear``), specification section 11."""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._args import check_bool


def _gemm_operand(a):
    """``a`` itself when the GEMM reads it in place (row- or column-major 2-D), else a C-contiguous copy."""
    if isinstance(a, np.ndarray) and a.ndim == 2 and not (a.flags.c_contiguous or a.flags.f_contiguous):
        return np.ascontiguousarray(a)
    return a


def linear(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None, *,
           out: Optional[np.ndarray] = None) -> np.ndarray:
    """``y = x @ weight.T + bias``, as ``torch.nn.functional.linear``.

    Args:
        x: ``[M, K]``; float32, float16 or bfloat16. A transposed (column-major) array is read in
            place; any other non-contiguous array is copied first.
        weight: ``[N, K]``, ``x``'s dtype (layouts as for ``x``).
        bias: optional ``[N]``, ``x``'s dtype, any stride.
        out: optional ``[M, N]`` result of ``x``'s dtype, row- or column-major, sharing no memory
            with the inputs.

    Returns:
        ``out``, or a new C-contiguous ``[M, N]`` array.

    Products are accumulated in float32 (oneDNN's matmul) and each element is rounded once to the
    dtype; the result is the same bit for bit for every thread count. ``K == 0`` gives ``bias``
    (or zeros). Bad shapes or dtypes raise ``ValueError`` naming the argument. The GIL is released
    while the GEMM runs.
    """
    return _core.linear(_gemm_operand(x), _gemm_operand(weight), bias, out)


def linear_backward(grad_output: np.ndarray, x: np.ndarray, weight: np.ndarray, *,
                    needs: Tuple[bool, bool, bool] = (True, True, True)
                    ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """Gradients of :func:`linear`: ``(grad_input, grad_weight, grad_bias)``.

    ``grad_input = grad_output @ weight``, ``grad_weight = grad_output.T @ x`` and
    ``grad_bias = grad_output.sum(0)``.

    Args:
        grad_output: ``[M, N]``; float32, float16 or bfloat16.
        x: the forward input ``[M, K]``, the same dtype.
        weight: ``[N, K]``, the same dtype.
        needs: which of ``(grad_input, grad_weight, grad_bias)`` to compute (three bools); the
            others are returned as ``None``.

    Returns:
        New C-contiguous arrays of the inputs' dtype (or ``None`` where not needed).

    float32 accumulation, each element rounded once. ``grad_bias`` sums the rows in a fixed order
    (fixed blocks of rows in float32, the blocks added in float64), so every result is the same
    bit for bit for every thread count. ``M == 0`` gives zero ``grad_weight`` and ``grad_bias``.
    """
    op = "tilegrad.linear_backward"
    if not isinstance(needs, (tuple, list)) or len(needs) != 3:
        raise ValueError(f"{op}: needs must be three bools (grad_input, grad_weight, grad_bias), got {needs!r}")
    wanted = [check_bool(op, f"needs[{i}]", v) for i, v in enumerate(needs)]
    grad_output, x, weight = (_gemm_operand(a) for a in (grad_output, x, weight))
    shapes = _gradient_shapes(grad_output, x, weight)
    if shapes is None:  # not three 2-D arrays: the operator's own checks name what is wrong
        _core.linear_backward(grad_output, x, weight)
    grads = [np.empty(s, dtype=grad_output.dtype) if w else None for s, w in zip(shapes, wanted)]
    _core.linear_backward(grad_output, x, weight, *grads)
    return tuple(grads)


def _gradient_shapes(grad_output, x, weight):
    """The shapes of (grad_input, grad_weight, grad_bias), or None if the operands are not 2-D arrays."""
    if not all(isinstance(a, np.ndarray) and a.ndim == 2 for a in (grad_output, x, weight)):
        return None
    return x.shape, weight.shape, (weight.shape[0],)
