"""LayerNorm forward and backward (``aclnnLayerNorm``, ``aclnnLayerNormBackward``)."""

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._args import argument_error, check_bool, check_float, check_int

_FWD = "aclnnLayerNorm"
_BWD = "aclnnLayerNormBackward"


def _shape_list(op: str, normalized_shape: Union[int, Sequence[int]]) -> list:
    """``normalized_shape`` as a list of ints (an int is one dim, as in torch)."""
    if isinstance(normalized_shape, (int, np.integer)) and not isinstance(normalized_shape, (bool, np.bool_)):
        return [int(normalized_shape)]
    if isinstance(normalized_shape, (str, bytes)) or not hasattr(normalized_shape, "__iter__"):
        raise argument_error(TypeError, f"{op}: normalized_shape must be an int or a sequence of ints, got "
                                        f"{normalized_shape!r} ({type(normalized_shape).__name__})")
    return [check_int(op, f"normalized_shape[{i}]", d) for i, d in enumerate(normalized_shape)]


def layer_norm(x: np.ndarray, normalized_shape: Union[int, Sequence[int]], weight: Optional[np.ndarray] = None,
               bias: Optional[np.ndarray] = None, eps: float = 1e-5, *, out: Optional[np.ndarray] = None,
               mean_out: Optional[np.ndarray] = None,
               rstd_out: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layer normalisation over the trailing ``normalized_shape`` dims:
    ``out = (x - mean) * rstd * weight + bias`` with ``mean = E[x]`` and
    ``rstd = 1 / sqrt(Var[x] + eps)`` (biased variance) per row.

    Same as CANN ``aclnnLayerNorm`` and ``torch.native_layer_norm`` (``F.layer_norm`` plus its saved
    mean and rstd).

    Args:
        x: input, rank 1..8; float32, float16 or bfloat16.
        normalized_shape: ``x``'s trailing dims (an int or a sequence of 1..rank ints).
        weight, bias: optional, of shape ``normalized_shape``, ``x``'s dtype or float32 (one dtype when
            both are given); absent: ones / zeros.
        eps: added to the variance, finite and ``>= 0``.
        out: optional output (``x``'s shape and dtype, any strides; may be ``x`` itself).
        mean_out, rstd_out: optional float32 (or ``x``'s dtype) outputs of shape
            ``x.shape[:-k] + (1,) * k``.

    Returns:
        ``(out, mean, rstd)``; mean and rstd float32 unless given. Arithmetic in float32, each output
        rounded once. The GIL is released.
    """
    return tuple(_core.layer_norm(x, _shape_list(_FWD, normalized_shape), weight, bias,
                                  check_float(_FWD, "eps", eps), out, mean_out, rstd_out))


def layer_norm_backward(dy: np.ndarray, x: np.ndarray, normalized_shape: Union[int, Sequence[int]],
                        mean: np.ndarray, rstd: np.ndarray, weight: Optional[np.ndarray] = None,
                        bias: Optional[np.ndarray] = None, *, output_mask: Sequence[bool] = (True, True, True),
                        dx_out: Optional[np.ndarray] = None, dweight_out: Optional[np.ndarray] = None,
                        dbias_out: Optional[np.ndarray] = None
                        ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """Gradients of :func:`layer_norm` given the forward's ``mean`` and ``rstd``: with
    ``xhat = (x - mean) * rstd`` and ``g = dy * weight``,
    ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))``, ``dweight = sum over rows of dy * xhat``,
    ``dbias = sum over rows of dy``.

    Same as CANN ``aclnnLayerNormBackward`` and ``torch.ops.aten.native_layer_norm_backward``.

    Args:
        dy: upstream gradient, ``x``'s shape and dtype.
        x: the forward input; float32, float16 or bfloat16.
        normalized_shape: the forward's.
        mean, rstd: the forward's (float32 or ``x``'s dtype; ``x``'s leading dims, size-1 dims aside).
        weight: the forward's (absent: ones). bias: the forward's, only validated (no gradient depends
            on it).
        output_mask: which of ``(dx, dweight, dbias)`` to compute (three bools).
        dx_out: optional ``dx`` (``x``'s shape and dtype; may be ``dy`` or ``x`` itself).
        dweight_out, dbias_out: optional outputs of shape ``normalized_shape``, float32 or the weight's
            dtype (overwritten).

    Returns:
        ``(dx, dweight, dbias)``, ``None`` where ``output_mask`` is False; dweight and dbias float32
        unless given. They are summed in a fixed order (row blocks of a size fixed by the shape, then
        the blocks in order), so they are bit-identical for every thread count; with no rows they are
        zeros. The GIL is released.
    """
    mask = list(output_mask) if hasattr(output_mask, "__iter__") else None
    if mask is None or len(mask) != 3:
        raise argument_error(ValueError, f"{_BWD}: output_mask must be three bools, got {output_mask!r}")
    mask = [check_bool(_BWD, f"output_mask[{i}]", m) for i, m in enumerate(mask)]
    return tuple(_core.layer_norm_backward(dy, x, _shape_list(_BWD, normalized_shape), mean, rstd, weight, bias,
                                           mask, dx_out, dweight_out, dbias_out))
