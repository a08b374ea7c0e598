"""Independent float64 reference for SwiGLU forward and backward, written from the vendor's documents
(aclnnSwiGlu.md, aclnnSwiGluGrad.md; specification section 7), never from tilegrad's code:

    a, b = split(x, 2, dim)      (a: the first half)
    s = 1 / (1 + exp(-a))
    out = a * s * b
    da = dy * b * (s + s * (1 - s) * a),   db = dy * s * a,   dx = concatenate([da, db], dim)

Tolerances
----------
tilegrad computes in float32 and rounds each output once. float32 outputs: within ``ULPS`` ulp of
the terms' magnitude (``|a * s * b|``; for da ``|dy * b| * s * (1 + |a| * (1 - s))``, the bound that
holds where ``1 + a * (1 - s)`` cancels); float16 / bfloat16 outputs: additionally 1 ulp of the dtype
(and one subnormal spacing near zero).
"""

import numpy as np

# The rounding contract (its check and dtypes), the same for every float kernel; tests import them here too.
from .rounding import BF16, F16, F32, ULPS, assert_close  # noqa: F401


def _sigmoid(a):
    z = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def _halves(x, dim):
    a, b = np.split(np.asarray(x).astype(np.float64), 2, axis=dim)
    return a, b


def swi_glu_ref(x, dim=-1):
    """(out, scale) in float64."""
    a, b = _halves(x, dim)
    s = _sigmoid(a)
    out = a * s * b
    return out, np.abs(out)


def swi_glu_grad_ref(dy, x, dim=-1):
    """(dx, scale) in float64, dx = concatenate([da, db], dim)."""
    a, b = _halves(x, dim)
    dy = np.asarray(dy).astype(np.float64)
    s = _sigmoid(a)
    da = dy * b * (s + s * (1 - s) * a)
    db = dy * s * a
    da_scale = np.abs(dy * b) * s * (1 + np.abs(a) * (1 - s))
    return np.concatenate([da, db], axis=dim), np.concatenate([da_scale, np.abs(db)], axis=dim)
