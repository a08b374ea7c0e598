"""Float64 NumPy references of binary cross entropy with logits, with the error bounds the tests hold
tilegrad to: the forward (aclnnBinaryCrossEntropyWithLogits) at the end of this file, and the backward
(specification section 2):

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


# ---- forward: aclnnBinaryCrossEntropyWithLogits --------------------------------------------------
#
#   l = -w * (pw * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))
#     =  w * (pw * t * softplus(-x) + (1 - t) * softplus(x)),   softplus(z) = log(1 + exp(z))
#
# (the vendor document's formula; softplus as numpy.logaddexp(0, z), exact in float64 for any z), then
# "none" keeps l, "mean" is sum(l) / numel(x) (NaN for no elements), "sum" is sum(l).

# fp32 vectors summed per lane before a double takes over (the kernel's group of 64 vectors): the
# summation error of the fp32 part is at most this many roundings of the sum of |l|.
FORWARD_SUM_ROUNDINGS = 64


def bce_forward_ref(x, t, w=None, pw=None, reduction="mean"):
    """(value, error bound) in float64. The bound allows fp32 math on every term (16 roundings of
    their magnitudes) and, for mean / sum, the fp32 part of the summation."""
    x, t, w, pw = f64(x), f64(t), f64(w), f64(pw)
    red = REDUCTIONS.get(reduction, reduction)
    w = 1.0 if w is None else w
    pw = 1.0 if pw is None else pw
    with np.errstate(invalid="ignore", over="ignore"):
        value = w * (pw * t * np.logaddexp(0.0, -x) + (1 - t) * np.logaddexp(0.0, x))
        terms = np.abs(w) * (np.abs(1 - t) + np.abs(pw * t)) * (np.abs(x) + np.log(2.0))
        value = np.broadcast_to(value, x.shape)
        bound = np.broadcast_to(16 * 2.0 ** -24 * terms, x.shape)
        if red == 0:
            return value, bound
        total, total_bound = value.sum(), bound.sum() + FORWARD_SUM_ROUNDINGS * 2.0 ** -24 * np.abs(value).sum()
        if red == 1:
            n = x.size
            return (np.float64(np.nan), 0.0) if n == 0 else (total / n, total_bound / n)
        return total, total_bound


def assert_bce_forward_close(result, x, t, w=None, pw=None, reduction="mean"):
    """tilegrad's forward within the bound of the reference plus one rounding to the output dtype (the
    target's); NaN exactly where the reference is NaN; +-inf exactly where it is."""
    value, bound = bce_forward_ref(x, t, w, pw, reduction)
    red = REDUCTIONS.get(reduction, reduction)
    assert result.dtype == t.dtype
    assert result.shape == (np.shape(x) if red == 0 else ())
    got = result.astype(np.float64)
    out_dt = np.dtype(t.dtype)
    value, bound = np.asarray(value), np.asarray(bound)
    with np.errstate(invalid="ignore"):
        tol = bound + EPS[out_dt] * np.abs(value) + TINY[out_dt]
        err = np.abs(got - value)
    nan_ref = np.isnan(value)
    np.testing.assert_array_equal(np.isnan(got), nan_ref)
    # +-inf where the value is infinite or beyond the output dtype's range
    with np.errstate(over="ignore"):
        inf_ref = np.isinf(value.astype(out_dt).astype(np.float64))
    np.testing.assert_array_equal(got[inf_ref], np.sign(value[inf_ref]) * np.inf)
    bad = ~nan_ref & ~inf_ref & ~(err <= tol)
    assert not bad.any(), (f"{bad.sum()} elements off; worst at {np.argwhere(bad)[0]}: got {got[bad].flat[0]!r}, "
                           f"want {value[bad].flat[0]!r}")
