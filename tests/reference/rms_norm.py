"""Independent float64 reference for RMSNorm forward and backward, written from the vendor's
documents (aclnnRmsNorm.md, aclnnRmsNormGrad.md; specification section 6), never from tilegrad's code:

    rstd = 1 / sqrt(mean(x^2 over gamma's dims) + eps)          (per row: x's leading dims)
    y    = x * rstd * gamma
    xhat = x * rstd
    dx   = (dy * gamma - xhat * mean(dy * gamma * xhat)) * rstd
    dgamma = sum over rows of dy * xhat                         (float32 output)

Tolerances
----------
tilegrad computes in float32 (widened inputs) and rounds each output once. For float32 outputs the
error is a few float32 ulps of the terms' magnitude: ``y`` within ``Y_ULPS`` ulp of |x * rstd * gamma|;
``dx`` within ``DX_ULPS`` ulp of ``(|dy * gamma| + |xhat| * mean(|dy * gamma * xhat|)) * rstd`` (the two terms can
cancel); ``dgamma`` within ``DGAMMA_REL * sum(|dy * xhat|)`` (an fp32 sum over the rows); ``rstd``
within ``RSTD_ULPS`` ulp. For float16 / bfloat16 outputs: within 1 ulp of the output dtype of the
reference (plus the fp32 bound and, near zero, one subnormal spacing of the dtype).
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

Y_ULPS = 8.0
RSTD_ULPS = 8.0
DX_ULPS = 16.0
DGAMMA_REL = 2e-6  # relative to sum |dy * xhat| (block sums of <= a few hundred rows in fp32)

_EPS = {F32: 2.0**-23, F16: 2.0**-10, BF16: 2.0**-7}
_SUBNORMAL_SPACING = {F32: 2.0**-149, F16: 2.0**-24, BF16: 2.0**-133}


def _f64(a):
    return np.asarray(a).astype(np.float64)


def rms_norm_ref(x, gamma, eps):
    """(y, rstd, y_scale): y and rstd in float64; rstd shaped x.shape[:-k] + (1,)*k."""
    x, g = _f64(x), _f64(gamma)
    axes = tuple(range(x.ndim - g.ndim, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rstd = 1.0 / np.sqrt(ms + eps)
    y = x * rstd * g
    return y, rstd, np.abs(y)


def rms_norm_grad_ref(dy, x, rstd, gamma):
    """(dx, dgamma, dx_scale, dgamma_scale) in float64; rstd any shape broadcastable as x's leading dims."""
    dy, x, g = _f64(dy), _f64(x), _f64(gamma)
    k = g.ndim
    lead = x.shape[: x.ndim - k]
    r = _f64(rstd).reshape(lead + (1,) * k)
    axes = tuple(range(x.ndim - k, x.ndim))
    xh = x * r
    dyg = dy * g
    mean = np.mean(dyg * xh, axis=axes, keepdims=True)
    dx = (dyg - xh * mean) * r
    # the fp32 mean is accurate to its terms' size, mean(|dy * gamma * xhat|), not to |mean|
    dx_scale = (np.abs(dyg) + np.abs(xh) * np.mean(np.abs(dyg * xh), axis=axes, keepdims=True)) * r
    lead_axes = tuple(range(x.ndim - k))
    dgamma = np.sum(dy * xh, axis=lead_axes)
    dgamma_scale = np.sum(np.abs(dy * xh), axis=lead_axes)
    return dx, dgamma, dx_scale, dgamma_scale


def assert_close(got, ref, scale, ulps, dtype=None):
    """|got - ref| <= ulps * eps32 * scale (+ 1 ulp of got's 16-bit dtype around ref)."""
    got64 = _f64(got)
    dtype = np.dtype(dtype or np.asarray(got).dtype)
    bound = ulps * _EPS[F32] * scale + 1e-37
    if dtype != F32:
        bound = bound + _EPS[dtype] * np.abs(ref) + _SUBNORMAL_SPACING[dtype]
    err = np.abs(got64 - ref)
    bad = ~(err <= bound) & ~(np.isnan(got64) & np.isnan(ref))
    assert not bad.any(), f"{bad.sum()} elements off; worst err {err[bad].max()} bound {bound[bad].min()}"
