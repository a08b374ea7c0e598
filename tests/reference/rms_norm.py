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

import numpy as np

# The rounding contract (its check and dtypes), the same for every float kernel; tests import them here too.
from .rounding import BF16, F16, F32, assert_close  # noqa: F401

Y_ULPS = 8.0
RSTD_ULPS = 8.0
DX_ULPS = 16.0
DGAMMA_REL = 2e-6  # relative to sum |dy * xhat| (block sums of <= a few hundred rows in fp32)


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
