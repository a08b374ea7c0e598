"""Independent float64 reference for LayerNorm forward and backward, written from the vendor's
documents (aclnnLayerNorm.md, aclnnLayerNormBackward.md; specification section 15), never from
tilegrad's code:

    mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + eps)            (per row: x's leading dims)
    out  = (x - mean) * rstd * w + b                               (w = 1, b = 0 when absent)
    xhat = (x - mean) * rstd, g = dy * w
    dx   = rstd * (g - mean(g) - xhat * mean(g * xhat))
    dw   = sum over rows of dy * xhat,  db = sum over rows of dy

Tolerances
----------
tilegrad computes in float32 and rounds each output once. The fp32 mean carries an error of a few
ulps of the row's largest |x|, which ``x - mean`` keeps: xhat is known to ``u = max|x| * rstd`` ulps (large
when a row's spread is small against its values). So, for float32 outputs: ``out`` within ``OUT_ULPS``
ulp of ``|xhat * w| + |b| + u * |w|``; ``dx`` within ``DX_ULPS`` ulp of
``rstd * (|g| + mean(|g|) + (|xhat| + u) * mean(|g| * (|xhat| + u)))`` (the terms can cancel); ``dw`` /
``db`` within ``PARAM_REL`` of ``sum(|dy| * (|xhat| + u))`` / ``sum(|dy|)``; mean and rstd within
``STAT_ULPS`` ulp of ``max|x|`` and ``rstd``. 16-bit outputs: one ulp of the dtype more (the one rounding), plus one
subnormal spacing near zero.
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

OUT_ULPS = 16.0
STAT_ULPS = 16.0
DX_ULPS = 32.0
PARAM_REL = 4e-6

_EPS = {F32: 2.0**-23, F16: 2.0**-10, BF16: 2.0**-7}
_SUBNORMAL_SPACING = {F32: 2.0**-149, F16: 2.0**-24, BF16: 2.0**-133}


def _f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def _axes(x, k):
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(out, mean, rstd, out_scale, mean_scale) in float64; mean / rstd shaped x.shape[:-k] + (1,)*k."""
    x = _f64(x)
    k = len(normalized_shape)
    axes = _axes(x, k)
    w = np.ones(normalized_shape) if weight is None else _f64(weight)
    b = np.zeros(normalized_shape) if bias is None else _f64(bias)
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    out = xhat * w + b
    mean_scale = np.max(np.abs(x), axis=axes, keepdims=True)
    u = mean_scale * rstd
    return out, mean, rstd, np.abs(xhat * w) + np.abs(b) + u * np.abs(w), mean_scale


def layer_norm_backward_ref(dy, x, normalized_shape, mean, rstd, weight=None):
    """(dx, dw, db, dx_scale, dw_scale, db_scale) in float64; mean / rstd any shape of x's leading dims."""
    dy, x = _f64(dy), _f64(x)
    k = len(normalized_shape)
    lead = x.shape[: x.ndim - k]
    m = _f64(mean).reshape(lead + (1,) * k)
    r = _f64(rstd).reshape(lead + (1,) * k)
    w = np.ones(normalized_shape) if weight is None else _f64(weight)
    axes = _axes(x, k)
    rows = tuple(range(x.ndim - k))
    xhat = (x - m) * r
    g = dy * w
    dx = r * (g - np.mean(g, axis=axes, keepdims=True) - xhat * np.mean(g * xhat, axis=axes, keepdims=True))
    hs = np.abs(xhat) + np.max(np.abs(x), axis=axes, keepdims=True, initial=0.0) * np.abs(r)  # |xhat| + u
    dx_scale = np.abs(r) * (np.abs(g) + np.mean(np.abs(g), axis=axes, keepdims=True)
                            + hs * np.mean(np.abs(g) * hs, axis=axes, keepdims=True))
    dw = np.sum(dy * xhat, axis=rows)
    db = np.sum(dy, axis=rows)
    return dx, dw, db, dx_scale, np.sum(np.abs(dy) * hs, axis=rows), np.sum(np.abs(dy), axis=rows)


def assert_close(got, want, scale, ulps, what, dtype=None):
    """|got - want| <= ulps * eps32 * scale, plus one ulp of a 16-bit output dtype and its subnormal spacing."""
    got64 = _f64(got)
    dtype = np.dtype(dtype if dtype is not None else np.asarray(got).dtype)
    tol = ulps * _EPS[F32] * np.broadcast_to(scale, np.shape(want))
    if dtype != F32:
        tol = tol + _EPS[dtype] * np.abs(want) + _SUBNORMAL_SPACING[dtype]
    err = np.abs(got64 - want)
    bad = ~(err <= tol)
    assert not bad.any(), (f"{what} ({dtype}): {int(bad.sum())} of {bad.size} elements off, worst "
                           f"{float(np.max(err - tol))} beyond the tolerance")
