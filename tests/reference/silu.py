"""Independent float64 reference for SiLU backward (specification section 1) and the tolerances the
tests hold tilegrad to (shared by the NumPy, C ABI, property, runtime and drop-in tests). Written from the formula, never from tilegrad's code:

    s = 1 / (1 + exp(-x)),   gradInput = gradOutput * s * (1 + x * (1 - s))

Tolerances
----------
float32 output: |got - ref| <= FP32_ULPS ulp of `scale` (+ the subnormal allowance below), where
``scale = |dy| * s * (1 + |x| * (1 - s))`` is the magnitude of the terms. Relative to |ref| alone no
fp32 evaluation can be accurate where ``1 + x*(1-s)`` cancels (x near -1.2785: the result passes
through 0), so the bound is relative to the terms' size (the condition of the formula).
Subnormal allowance: for x < -87, s = sigmoid(x) itself is a subnormal float32 (as it is in
PyTorch's fp32 evaluation), quantised to 2^-149; that absolute error is multiplied by
|dy * (1 + x*(1-s))| <= |dy| * (1 + |x|), so ``|dy| * (1 + |x|) * 2^-150`` more is allowed.
float16 / bfloat16 output: the reference rounded to the dtype, within 1 ulp of the dtype (or within
the fp32 bound when the exact value is so small that fp32 evaluation error dominates).
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

# Measured maximum over ~3M random fp32 inputs in [-110, 90] at every ISA: 4.53 ulp of `scale`.
FP32_ULPS = 6.0

_MANT = {F32: 23, F16: 10, BF16: 7}
_MIN_NORMAL_EXP = {F32: -126, F16: -14, BF16: -126}


def silu_backward_ref(dy, x):
    """(ref, scale) in float64, broadcast; inputs of any float dtype are widened exactly."""
    dy = np.asarray(dy).astype(np.float64)
    x = np.asarray(x).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.exp(-np.abs(x))  # never overflows
        r = 1.0 / (1.0 + z)
        s = np.where(x >= 0, r, z * r)
        c = np.where(x >= 0, z * r, r)  # 1 - s without cancellation
        ref = dy * s * (1.0 + x * c)
        scale = np.abs(dy) * s * (1.0 + np.abs(x) * c)
    return ref, scale


def silu_backward_f64(dy, x):
    """The exact gradient alone (float64, broadcast): ``silu_backward_ref(dy, x)[0]``."""
    return silu_backward_ref(dy, x)[0]


def ulp(v, dtype):
    """Spacing of `dtype` at |v| (float64 array), including the subnormal range."""
    dtype = np.dtype(dtype)
    mant, emin = _MANT[dtype], _MIN_NORMAL_EXP[dtype]
    v = np.abs(np.asarray(v, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(v > 0, v, 1.0)))
    e = np.maximum(np.where(np.isfinite(e), e, emin), emin)
    return np.exp2(e - mant)


def fp32_bound(dy, x, scale):
    dy = np.asarray(dy).astype(np.float64)
    x = np.asarray(x).astype(np.float64)
    return FP32_ULPS * ulp(scale, F32) + np.abs(dy) * (1.0 + np.abs(x)) * 2.0**-150


def assert_silu_close(got, dy, x, out_dtype=None):
    """Checks tilegrad's result against the reference with the tolerances above; NaN where the
    reference is NaN (x = +-inf or NaN), the exact sign of zero for the -0 cases handled by callers."""
    got = np.asarray(got)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else got.dtype)
    assert got.dtype == out_dtype
    ref, scale = silu_backward_ref(dy, x)
    ref = np.broadcast_to(ref, got.shape)
    scale = np.broadcast_to(scale, got.shape)
    dyb = np.broadcast_to(np.asarray(dy).astype(np.float64), got.shape)
    xb = np.broadcast_to(np.asarray(x).astype(np.float64), got.shape)
    g = got.astype(np.float64)
    nan_ref = np.isnan(ref)
    assert np.array_equal(np.isnan(g), nan_ref), (
        f"NaN mismatch at x={xb[np.isnan(g) != nan_ref][:5]}, got={g[np.isnan(g) != nan_ref][:5]}")
    ok = ~nan_ref
    g, ref, scale, dyb, xb = g[ok], ref[ok], scale[ok], dyb[ok], xb[ok]
    within32 = np.abs(g - ref) <= fp32_bound(dyb, xb, scale)
    if out_dtype == F32:
        good = within32
    else:
        with np.errstate(over="ignore"):
            rref = ref.astype(out_dtype).astype(np.float64)  # the exact value rounded once
        good = (np.abs(g - rref) <= ulp(rref, out_dtype)) | within32
    if not good.all():
        i = np.flatnonzero(~good)[:8]
        raise AssertionError(
            f"{(~good).sum()} of {good.size} {out_dtype} results out of tolerance: x={xb[i]}, dy={dyb[i]}, "
            f"got={g[i]}, ref={ref[i]}, err/ulp32(scale)={np.abs(g[i] - ref[i]) / ulp(scale[i], F32)}")
