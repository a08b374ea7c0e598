"""Case builders the binary-cross-entropy-with-logits tests share (forward and backward, NumPy API
and C ABI): random operands, the broadcast shapes, extreme logits, the torch cross-check cases and
the error-test helper. The float64 references and their bounds are reference/bce.py."""

import numpy as np
import pytest

from reference.bce import BF16, F16, F32

DTYPES = [F32, F16, BF16]

SELF_SHAPE = (3, 4, 5)
# weight / pos_weight / grad_output shapes that broadcast to SELF_SHAPE: every position of a 1.
BROADCAST_SHAPES = [(), (1,), (5,), (1, 5), (4, 1), (4, 5), (3, 1, 1), (3, 4, 1), (3, 1, 5), (1, 4, 5), (1, 1, 1),
                    (3, 4, 5)]

EXTREME_X = [-3.4e38, -1e4, -200.0, -89.0, -30.0, -20.0, -5.0, -1e-3, -0.0, 0.0, 1e-3, 5.0, 20.0, 30.0, 89.0,
             200.0, 1e4, 3.4e38]

TORCH_CASES = [
    # (shape, reduction, weight shape, pos_weight shape)
    ((6, 37), "mean", None, None),
    ((6, 37), "sum", (37,), None),
    ((6, 37), "none", None, (37,)),
    ((6, 37), "mean", (6, 1), (37,)),
    ((2, 3, 17), "sum", (3, 1), (2, 3, 17)),
    ((), "mean", (), ()),
]


def rand(shape, dtype, rng, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _operands(rng, shape, dtypes, w_shape, pw_shape, x_range):
    """(x, t, w, pw) drawn from rng in that order; w / pw None where their shape is None."""
    x = rand(shape, dtypes[0], rng, -x_range, x_range)
    t = rand(shape, dtypes[1], rng, 0, 1)
    w = None if w_shape is None else rand(w_shape, dtypes[2], rng, 0, 2)
    pw = None if pw_shape is None else rand(pw_shape, dtypes[3], rng, 0.2, 4)
    return x, t, w, pw


def make_forward(shape, dtypes=(F32,) * 4, w_shape=None, pw_shape=None, seed=0, x_range=8.0):
    """(x, t, w, pw) with dtypes for (x, t, w, pw)."""
    return _operands(np.random.default_rng(seed), shape, dtypes, w_shape, pw_shape, x_range)


def make_backward(shape, dtypes=(F32,) * 5, dy_shape=(), w_shape=None, pw_shape=None, seed=0):
    """(dy, x, t, w, pw) with dtypes for (dy, x, t, w, pw)."""
    rng = np.random.default_rng(seed)
    dy = rand(dy_shape, dtypes[0], rng, 0.5, 2.0)
    return (dy, *_operands(rng, shape, dtypes[1:], w_shape, pw_shape, 8.0))


def extreme_logits(dtype):
    """(x, t): every EXTREME_X value (those bfloat16 holds) against targets 0, 1 and 0.5."""
    xs = np.array(EXTREME_X, np.float32)
    if dtype == BF16:
        xs = xs[np.abs(xs) < 3e38]
    x = np.repeat(xs, 3).astype(dtype)
    t = np.tile(np.array([0.0, 1.0, 0.5]), len(xs)).astype(dtype)
    return x, t


def streaming_operands(l3_bytes):
    """(x, t, w, pw) fp32 vectors of l3_bytes / 32 + 4099 elements (binary targets): long enough that
    the operator's output bypasses the caches."""
    n = l3_bytes // 32 + 4099
    rng = np.random.default_rng(1)
    x = rand((n,), F32, rng, -10, 10)
    t = rng.integers(0, 2, size=n).astype(F32)
    w = rand((n,), F32, rng, 0, 2)
    pw = rand((n,), F32, rng, 0.5, 2)
    return x, t, w, pw


def raises(exc, match, fn, *args, **kw):
    """fn(*args, **kw) raises exc with a message matching match; returns the exception."""
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kw)
    return info.value
