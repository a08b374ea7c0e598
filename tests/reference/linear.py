"""Independent float64 reference for the linear layer (specification section 11; PyTorch's
``F.linear`` formula), never from tilegrad's code:

    y = x @ weight.T + bias
    grad_input = dy @ weight,   grad_weight = dy.T @ x,   grad_bias[n] = sum over rows m of dy[m, n]

Tolerances
----------
tilegrad accumulates in float32 and rounds each output once: each result is compared with its
float64 value by the shared rounding check (reference/rounding.py: ``ULPS`` float32 ulp of its
terms' magnitude, e.g. ``|x| @ |weight|.T + |bias|``: the bound that holds however the sum is
ordered; plus, for float16 / bfloat16 outputs, 1 ulp of the dtype for the final rounding).
"""

import numpy as np

from .rounding import BF16, F16, F32, assert_close  # noqa: F401  (the same rounding contract)


def _f64(a):
    return np.asarray(a).astype(np.float64)


def linear_ref(x, weight, bias=None):
    """(y, scale) in float64."""
    x, w = _f64(x), _f64(weight)
    y, scale = x @ w.T, np.abs(x) @ np.abs(w).T
    if bias is not None:
        y, scale = y + _f64(bias), scale + np.abs(_f64(bias))
    return y, scale


def linear_backward_ref(dy, x, weight):
    """((grad_input, scale), (grad_weight, scale), (grad_bias, scale)) in float64."""
    dy, x, w = _f64(dy), _f64(x), _f64(weight)
    return ((dy @ w, np.abs(dy) @ np.abs(w)), (dy.T @ x, np.abs(dy).T @ np.abs(x)),
            (dy.sum(axis=0), np.abs(dy).sum(axis=0)))
