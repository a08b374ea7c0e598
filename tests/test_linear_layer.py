"""tg.linear and tg.linear_backward against the float64 reference of tests/reference/linear.py:
every dtype, odd and empty shapes, transposed and strided operands, thread counts, bad input."""

import numpy as np
import pytest

import tilegrad as tg
from reference.linear import BF16, F16, F32, assert_close, linear_backward_ref, linear_ref

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
# (M, K, N): odd sizes, one row, sizes that need several GEMM blocks, and every empty dimension.
SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (300, 96, 520), (0, 4, 3), (4, 0, 3), (4, 3, 0)]


def _operands(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = (rng.standard_normal((n, k)) / max(k, 1) ** 0.5).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    dy = rng.standard_normal((m, n)).astype(dtype)
    return x, w, b, dy


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_forward(dtype, shape, with_bias):
    m, k, n = shape
    x, w, b, _ = _operands(m, k, n, dtype)
    bias = b if with_bias else None
    y = tg.linear(x, w, bias)
    assert y.dtype == dtype and y.shape == (m, n)
    assert_close(y, *linear_ref(x, w, bias))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward(dtype, shape):
    m, k, n = shape
    x, w, _, dy = _operands(m, k, n, dtype, seed=1)
    dx, dw, db = tg.linear_backward(dy, x, w)
    assert (dx.shape, dw.shape, db.shape) == ((m, k), (n, k), (n,))
    assert dx.dtype == dw.dtype == db.dtype == dtype
    for got, (ref, scale) in zip((dx, dw, db), linear_backward_ref(dy, x, w)):
        assert_close(got, ref, scale)


def test_backward_computes_only_what_is_needed():
    x, w, _, dy = _operands(9, 6, 4, F32, seed=2)
    (ref_dx, s_dx), _, (ref_db, s_db) = linear_backward_ref(dy, x, w)
    dx, dw, db = tg.linear_backward(dy, x, w, needs=(True, False, True))
    assert dw is None
    assert_close(dx, ref_dx, s_dx)
    assert_close(db, ref_db, s_db)
    assert tg.linear_backward(dy, x, w, needs=(False, False, False)) == (None, None, None)


def test_transposed_and_strided_operands():
    """Transposed (column-major) operands are read in place, other strides through a copy; a strided
    bias and a column-major out are written and read where they are."""
    x, w, b, dy = _operands(40, 24, 12, F32, seed=3)
    xt = np.asfortranarray(x)                   # column-major x
    w_sliced = np.repeat(w, 2, axis=1)[:, ::2]  # every other column: neither layout
    b_strided = np.repeat(b, 3)[::3]
    out = np.zeros((12, 40), F32).T              # column-major out
    y = tg.linear(xt, w_sliced, b_strided, out=out)
    assert y is out
    assert_close(out, *linear_ref(x, w, b))
    dx, dw, db = tg.linear_backward(np.asfortranarray(dy), xt, w_sliced)
    for got, (ref, scale) in zip((dx, dw, db), linear_backward_ref(dy, x, w)):
        assert_close(got, ref, scale)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_results_do_not_depend_on_thread_count(threads, dtype):
    x, w, b, dy = _operands(520, 200, 700, dtype, seed=4)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append((tg.linear(x, w, b), *tg.linear_backward(dy, x, w)))
    for other in results[1:]:
        for a, c in zip(results[0], other):
            assert a.tobytes() == c.tobytes()


def test_zero_inner_dimension_gives_bias_and_zero_gradients():
    x, w, b, dy = _operands(3, 0, 5, F32)
    np.testing.assert_array_equal(tg.linear(x, w, b), np.broadcast_to(b, (3, 5)))
    dx, dw, db = tg.linear_backward(dy, x, w)
    assert dx.shape == (3, 0) and dw.shape == (5, 0)
    np.testing.assert_array_equal(db, dy.sum(axis=0))
    _, dw, db = tg.linear_backward(np.zeros((0, 5), F32), np.zeros((0, 2), F32), np.ones((5, 2), F32))
    np.testing.assert_array_equal(dw, np.zeros((5, 2), F32))
    np.testing.assert_array_equal(db, np.zeros(5, F32))


@pytest.mark.parametrize("call, match", [
    (lambda x, w, b: tg.linear(x, w[:, :-1]), r"tilegrad.linear: weight shape \[5,5\] must be \[N, 6\]"),
    (lambda x, w, b: tg.linear(x[0], w), r"tilegrad.linear: x must have rank 2, got rank 1"),
    (lambda x, w, b: tg.linear(x, w, b[:-1]), r"tilegrad.linear: bias shape \[4\] != \[weight.shape\[0\]\] = \[5\]"),
    (lambda x, w, b: tg.linear(x, w.astype(F16)), r"tilegrad.linear: weight dtype float16 != x dtype float32"),
    (lambda x, w, b: tg.linear(x.astype(np.float64), w.astype(np.float64)),
     r"tilegrad.linear: x dtype must be one of \{float32, float16, bfloat16\}, got float64"),
    (lambda x, w, b: tg.linear(x, w, out=np.empty((3, 4), F32)), r"tilegrad.linear: out shape \[3,4\]"),
    (lambda x, w, b: tg.linear(x, w, out=x[:, :5]), r"tilegrad.linear: out overlaps x"),
    (lambda x, w, b: tg.linear_backward(np.ones((3, 4), F32), x, w),
     r"tilegrad.linear_backward: grad_output shape \[3,4\]"),
    (lambda x, w, b: tg.linear_backward(np.ones((3, 5), F32), x, w, needs=(True, 1, True)),
     r"tilegrad.linear_backward: needs\[1\] must be a bool"),
    (lambda x, w, b: tg.linear_backward(np.ones((3, 5), F32), x, w, needs=(True,)),
     r"tilegrad.linear_backward: needs must be three bools"),
    (lambda x, w, b: tg.linear_backward(np.ones(5, F32), x, w),
     r"tilegrad.linear_backward: grad_output must have rank 2, got rank 1"),
])
def test_bad_arguments_name_the_argument(call, match):
    x, w, b, _ = _operands(3, 6, 5, F32)
    with pytest.raises((ValueError, TypeError), match=match):
        call(x, w, b)


def test_non_array_input_is_a_type_error():
    with pytest.raises(TypeError, match="weight"):
        tg.linear(np.ones((2, 2), F32), [[1.0, 2.0]])
