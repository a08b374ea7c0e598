"""Independent float64 reference for the linear layer (specification section 11; PyTorch's
``F.linear`` formula), never from tilegrad's code:

    y = x @ weight.T + bias
    grad_input = dy @ weight,   grad_weight = dy.T @ x,   grad_bias[n] = sum over rows m of dy[m, n]

Tolerances
----------
tilegrad accumulates in float32 and rounds each output once. Each result is compared with its
float64 value within ``ULPS`` float32 ulp of its terms' magnitude (``|x| @ |weight|.T + |bias|``
and the like: the bound that holds however the sum is ordered), plus, for float16 / bfloat16
outputs, 1 ulp of the dtype (and one subnormal spacing near zero) for the final rounding.
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

ULPS = 4.0
_EPS = {F32: 2.0**-23, F16: 2.0**-10, BF16: 2.0**-7}
_SUBNORMAL_SPACING = {F32: 2.0**-149, F16: 2.0**-24, BF16: 2.0**-133}


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


def assert_close(got, ref, scale):
    got64 = _f64(got)
    dtype = np.asarray(got).dtype
    bound = ULPS * _EPS[F32] * scale + 1e-37
    if dtype != F32:
        bound = bound + _EPS[dtype] * np.abs(ref) + _SUBNORMAL_SPACING[dtype]
    err = np.abs(got64 - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements off; worst err {err[bad].max()}"
