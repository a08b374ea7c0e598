"""Independent float64 reference for GELU and GeGLU, forward and backward, written from the vendor's
documents (aclnnGelu.md, aclnnGeluV2.md, aclnnGeluBackward.md, aclnnGeluBackwardV2.md, aclnnGeGluV3.md,
aclnnGeGluV3Backward.md; specification sections 12 and 13), never from tilegrad's code:

    erf form ("none", 0):  gelu(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)),
                           gelu'(x) = 1/2 + 1/2 erf(x / sqrt 2) + x / sqrt(2 pi) * exp(-x^2 / 2)
    tanh form ("tanh", 1): gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
                           gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
    GeGLU: a, b = split(self, 2, dim); activateLeft: out = gelu(a) * b, else out = a * gelu(b);
           outGelu = gelu(activated half); grads: activated half dy * linear * gelu'(h), linear half
           dy * gelu (the given outGelu).

Phi is evaluated as erfc(-x / sqrt 2) / 2 and 1 + tanh(u) as 2 / (1 + exp(-2u)) (identities), so
that the negative tail keeps float64's relative accuracy.

Tolerances
----------
tilegrad computes in float32 and rounds each output once. float32 outputs: within ``ULPS`` ulp of a
scale that includes the function's sensitivity to its float32 intermediate (the tanh form's
argument ``k = 2u`` is rounded, which moves ``sigmoid(k)`` by ``(1 - s) |k|`` ulp); float16 /
bfloat16 outputs additionally 1 ulp of the dtype (and one subnormal spacing near zero).
"""

import math

import numpy as np

# The rounding contract (its check and dtypes), the same for every float kernel; tests import them here too.
from .rounding import BF16, F16, F32, ULPS, assert_close  # noqa: F401
from .swi_glu import _sigmoid  # 1 / (1 + exp(-z)) without overflow

_C = math.sqrt(2.0 / math.pi)
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _parts(x, approximate):
    """(gelu, gelu', forward scale, derivative scale) of float64 x."""
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate in ("tanh", 1):
            u = _C * (x + 0.044715 * x**3)
            du = _C * (1 + 3 * 0.044715 * x**2)
            s = _sigmoid(2 * u)  # 0.5 (1 + tanh u)
            c = 1 - s
            g = x * s
            dg = s + x * 2 * s * c * du  # 0.5 x (1 - tanh^2 u) u' = 2 x s (1 - s) u'
            k = np.abs(2 * u)
            g_scale = np.abs(g) * (1 + c * k)
            dg_scale = (s + np.abs(x) * 2 * s * c * du) * (1 + k)
        else:
            cdf = 0.5 * _erfc(-x / math.sqrt(2))
            pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
            g = x * cdf
            dg = cdf + x * pdf
            g_scale = np.abs(g)
            dg_scale = cdf + np.abs(x) * pdf
    return g, dg, g_scale, dg_scale


def gelu_ref(x, approximate="none"):
    """(y, scale) in float64."""
    g, _, gs, _ = _parts(_f64(x), approximate)
    return g, gs


def gelu_backward_ref(dy, x, approximate="none"):
    """(dx, scale) in float64 (dy and x broadcast)."""
    dy = _f64(dy)
    _, dg, _, dgs = _parts(_f64(x), approximate)
    with np.errstate(invalid="ignore"):
        return dy * dg, np.abs(dy) * dgs


def _halves(x, dim, activate_left):
    a, b = np.split(_f64(x), 2, axis=dim)
    return (a, b) if activate_left else (b, a)


def ge_glu_ref(x, dim=-1, approximate="tanh", activate_left=False):
    """((out, out scale), (out_gelu, out_gelu scale)) in float64."""
    h, l = _halves(x, dim, activate_left)
    g, _, gs, _ = _parts(h, approximate)
    return (g * l, gs * np.abs(l)), (g, gs)


def ge_glu_backward_ref(dy, x, gelu, dim=-1, approximate="tanh", activate_left=False):
    """(dx, scale) in float64: dx in x's layout, dh in the activated half's place."""
    h, l = _halves(x, dim, activate_left)
    dy, gelu = _f64(dy), _f64(gelu)
    _, dg, _, dgs = _parts(h, approximate)
    dh, dh_scale = dy * l * dg, np.abs(dy * l) * dgs
    dl, dl_scale = dy * gelu, np.abs(dy * gelu)
    first, second = ((dh, dl), (dh_scale, dl_scale)) if activate_left else ((dl, dh), (dl_scale, dh_scale))
    return np.concatenate(first, axis=dim), np.concatenate(second, axis=dim)


def gelu_mul_ref(gate, up, approximate="tanh"):
    """(out, scale) in float64: gelu(gate) * up (GeGLU on two tensors, gate activated)."""
    g, _, gs, _ = _parts(_f64(gate), approximate)
    up = _f64(up)
    return g * up, gs * np.abs(up)


def gelu_mul_backward_ref(dy, gate, up, approximate="tanh"):
    """((d_gate, scale), (d_up, scale)) in float64: dy * up * gelu'(gate) and dy * gelu(gate), gelu
    recomputed from gate."""
    dy, up = _f64(dy), _f64(up)
    g, dg, gs, dgs = _parts(_f64(gate), approximate)
    return (dy * up * dg, np.abs(dy * up) * dgs), (dy * g, np.abs(dy) * gs)
