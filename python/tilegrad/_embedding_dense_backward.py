"""Embedding dense backward (``aclnnEmbeddingDenseBackward``)."""

from typing import Optional

import numpy as np

from . import _core
from ._args import check_bool, check_int, check_optional_int

_OP = "aclnnEmbeddingDenseBackward"


def embedding_dense_backward(grad_output: np.ndarray, indices: np.ndarray, num_weights: int,
                             padding_idx: Optional[int] = -1, scale_grad_by_freq: bool = False, *,
                             out: Optional[np.ndarray] = None) -> np.ndarray:
    """Gradient of an embedding lookup with respect to its ``(num_weights, D)`` weight.

    ``out[r, :] = sum(grad_flat[i, :] for i with indices_flat[i] == r)`` for every row
    ``r != padding_idx``, divided by ``count(r)`` (the occurrences of ``r`` in ``indices``) when
    ``scale_grad_by_freq``. ``grad_flat`` is ``grad_output`` reshaped to ``(indices.size, D)``.
    Rows never hit, and the padding row, are zero.

    Same as ``torch.ops.aten.embedding_dense_backward(grad_output, indices, num_weights,
    padding_idx, scale_grad_by_freq)`` and CANN ``aclnnEmbeddingDenseBackward``, except that
    float16/bfloat16 rows are summed in float32 and rounded once (PyTorch rounds after every
    addition), and an index out of range raises instead of being skipped or written out of bounds.

    Args:
        grad_output: gradient of the lookup's result, shape ``(*indices.shape, D)`` or any shape
            of rank 2..8 whose leading dims multiply to ``indices.size``; float32, float16 or
            bfloat16; any strides.
        indices: the looked-up rows, rank 1..8; int64, int32, int16, int8, uint8 or bool. Float
            indices are a TypeError, as in torch (the C ABI truncates them, as the vendor's does).
            Every index must be in ``[0, num_weights)``.
        num_weights: rows of the embedding weight (``>= 0``; an int or NumPy integer).
        padding_idx: the row that gets no gradient (an int or NumPy integer in int64); ``None``
            or any value outside ``[0, num_weights)`` (e.g. -1) means none.
        scale_grad_by_freq: divide each row's sum by how often its index occurs (a bool).
        out: optional result array of shape ``(num_weights, D)``, float32, float16 or bfloat16
            (its dtype may differ from ``grad_output``'s), any strides. Every element is written.

    Returns:
        ``out``, or a new C-contiguous array of ``grad_output``'s dtype.

    Raises:
        IndexError: an index is negative or ``>= num_weights`` (the lowest such position is named).
        ValueError: bad dtype, rank or shape; an int argument outside int64.
        TypeError: an argument of the wrong type (e.g. ``num_weights=4.7``, ``scale_grad_by_freq='no'``,
            float ``indices``).
        MemoryError: the output or the workspace cannot be allocated (operator and size named).

    Deterministic: each row is summed in index order in float32, whatever the thread count.
    The GIL is released while the kernel runs.
    """
    num_weights = check_int(_OP, "num_weights", num_weights)
    padding_idx = check_optional_int(_OP, "padding_idx", padding_idx)
    scale_grad_by_freq = check_bool(_OP, "scale_grad_by_freq", scale_grad_by_freq)
    if padding_idx is None or not (0 <= padding_idx < num_weights):
        padding_idx = -1
    return _core.embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq, out)
