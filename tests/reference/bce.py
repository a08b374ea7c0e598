"""Float64 NumPy reference of binary cross entropy with logits backward (SEMANTICS section 2) and the
error bound the tests hold tilegrad to:

    s = sigmoid(x);   g = s - t, or with pos_weight (pt = pw * t): g = (pt + 1 - t) * s - pt
    out = g * dy * w * scale,   scale = 1 / max(1, numel(x)) for "mean" (1), 1 for "none" (0) / "sum" (2)

Everything broadcasts to x's shape; a missing weight / pos_weight means ones.
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
EPS = {F32: 2.0 ** -24, F16: 2.0 ** -11, BF16: 2.0 ** -8}      # unit roundoff of the output
TINY = {F32: 1e-45, F16: 2.0 ** -25, BF16: 1e-45}              # half the smallest subnormal (fp16)
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def sigmoid64(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


def bce_backward_ref(dy, x, t, w=None, pw=None, reduction="mean"):
    """(value, error bound) in float64; the bound allows fp32 math on the terms and one rounding."""
    dy, x, t, w, pw = f64(dy), f64(x), f64(t), f64(w), f64(pw)
    red = REDUCTIONS.get(reduction, reduction)
    s = sigmoid64(x)
    if pw is None:
        g = s - t
        terms = np.abs(1 - t) + np.abs(t)
    else:
        pt = pw * t
        g = (pt + 1 - t) * s - pt
        terms = np.abs(1 - t) + np.abs(pt)
    scale = 1.0 / max(1, x.size) if red == 1 else 1.0
    mult = dy * (1.0 if w is None else w) * scale
    with np.errstate(invalid="ignore"):
        value = np.broadcast_to(g * mult, x.shape)
        bound = np.broadcast_to(16 * 2.0 ** -24 * terms * np.abs(mult), x.shape)
    return value, bound


def assert_bce_close(result, dy, x, t, w=None, pw=None, reduction="mean"):
    """tilegrad's result within the bound of the reference plus one rounding to the output dtype (the
    target's); NaN exactly where the reference is NaN."""
    value, bound = bce_backward_ref(dy, x, t, w, pw, reduction)
    assert result.shape == np.shape(x)
    assert result.dtype == t.dtype
    got = result.astype(np.float64)
    out_dt = np.dtype(t.dtype)
    tol = bound + EPS[out_dt] * np.abs(value) + TINY[out_dt]
    err = np.abs(got - value)
    nan_ref = np.isnan(value)
    np.testing.assert_array_equal(np.isnan(got), nan_ref)
    bad = ~nan_ref & ~(err <= tol)
    assert not bad.any(), (f"{bad.sum()} elements off; worst at {np.argwhere(bad)[0]}: got {got[bad][0]!r}, "
                           f"want {value[bad][0]!r}")
