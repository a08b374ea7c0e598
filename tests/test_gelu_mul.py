"""tg.gelu_mul and tg.gelu_mul_backward (GeGLU on two separate arrays, the gate activated) against the
float64 reference of tests/reference/gelu.py: both forms, every dtype, every ISA, odd sizes, strided
and in-place operands, thread counts, extreme values, empty arrays and bad input; and against
tg.ge_glu on the concatenation (the same formula on one tensor)."""

import numpy as np
import pytest

import tilegrad as tg
from reference.gelu import BF16, F16, F32, assert_close, gelu_mul_backward_ref, gelu_mul_ref

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
FORMS = ["none", "tanh"]
SHAPES = [(1,), (7,), (4, 33), (3, 5, 130), (2, 1001)]


def _data(shape, dtype, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_backward(isa, form, dtype, shape):
    gate, up, dy = _data(shape, dtype, 1), _data(shape, dtype, 2), _data(shape, dtype, 3, 1.0)
    out = tg.gelu_mul(gate, up, form)
    assert out.dtype == dtype and out.shape == shape
    assert_close(out, *gelu_mul_ref(gate, up, form))
    d_gate, d_up = tg.gelu_mul_backward(dy, gate, up, form)
    assert d_gate.dtype == d_up.dtype == dtype and d_gate.shape == d_up.shape == shape
    (want_g, scale_g), (want_u, scale_u) = gelu_mul_backward_ref(dy, gate, up, form)
    assert_close(d_gate, want_g, scale_g)
    assert_close(d_up, want_u, scale_u)


@pytest.mark.parametrize("form", FORMS)
def test_same_values_as_ge_glu_on_the_concatenation(form):
    """ge_glu(cat([gate, up]), activate_left=True) computes the same elements with the same math."""
    gate, up, dy = _data((6, 40), F32, 4), _data((6, 40), F32, 5), _data((6, 40), F32, 6)
    out, gelu = tg.ge_glu(np.concatenate([gate, up], -1), -1, form, True)
    np.testing.assert_array_equal(tg.gelu_mul(gate, up, form), out)
    dx = tg.ge_glu_backward(dy, np.concatenate([gate, up], -1), gelu, -1, form, True)
    d_gate, d_up = tg.gelu_mul_backward(dy, gate, up, form)
    np.testing.assert_array_equal(d_gate, dx[:, :40])
    np.testing.assert_array_equal(d_up, dx[:, 40:])


def test_default_form_is_tanh():
    gate, up = _data((3, 9), F32, 7), _data((3, 9), F32, 8)
    np.testing.assert_array_equal(tg.gelu_mul(gate, up), tg.gelu_mul(gate, up, "tanh"))


@pytest.mark.parametrize("form", FORMS)
def test_extreme_values(form):
    gate = np.array([-np.inf, -1e30, -100.0, -10.0, -1e-30, 0.0, 1e-30, 10.0, 100.0, 1e30, np.inf, np.nan],
                    dtype=np.float32)
    up = np.full_like(gate, 2.0)
    dy = np.ones_like(gate)
    out = tg.gelu_mul(gate, up, form)
    assert_close(out, *gelu_mul_ref(gate, up, form))
    d_gate, d_up = tg.gelu_mul_backward(dy, gate, up, form)
    (want_g, scale_g), (want_u, scale_u) = gelu_mul_backward_ref(dy, gate, up, form)
    # gelu'(+-inf) is taken as its limit (1 / 0), as GELU's backward does
    want_g[0], want_g[10] = 0.0, 2.0
    scale_g[0] = scale_g[10] = 0.0  # exactly (the reference's scale there is inf * 0)
    assert_close(d_gate, want_g, scale_g)
    assert_close(d_up, want_u, scale_u)


def test_strided_operands_and_in_place():
    base = _data((16, 80), F32, 9)
    gate, up = base[:, :40], base[:, 40:]  # two views into one projection output
    want = tg.gelu_mul(np.ascontiguousarray(gate), np.ascontiguousarray(up))
    np.testing.assert_array_equal(tg.gelu_mul(gate, up), want)
    np.testing.assert_array_equal(tg.gelu_mul(gate.T.copy().T, up), want)
    g = gate.copy()
    assert tg.gelu_mul(g, up, out=g) is g
    np.testing.assert_array_equal(g, want)
    dy = _data((16, 40), F32, 10)
    want_g, want_u = tg.gelu_mul_backward(dy, np.ascontiguousarray(gate), np.ascontiguousarray(up))
    d_gate, d_up = np.empty((40, 16), np.float32).T, np.empty((16, 40), np.float32)
    got = tg.gelu_mul_backward(dy, gate, up, out=(d_gate, d_up))
    assert got[0] is d_gate and got[1] is d_up
    np.testing.assert_array_equal(d_gate, want_g)
    np.testing.assert_array_equal(d_up, want_u)


def test_empty():
    e = np.empty((0, 5), np.float32)
    assert tg.gelu_mul(e, e).shape == (0, 5)
    assert [g.shape for g in tg.gelu_mul_backward(e, e, e)] == [(0, 5), (0, 5)]


@pytest.mark.parametrize("count", [2, 3])
def test_threads_bit_identical(threads, count):
    gate, up, dy = _data((300, 1000), BF16, 11), _data((300, 1000), BF16, 12), _data((300, 1000), BF16, 13)
    threads(1)
    one = tg.gelu_mul(gate, up), *tg.gelu_mul_backward(dy, gate, up)
    threads(count)
    many = tg.gelu_mul(gate, up), *tg.gelu_mul_backward(dy, gate, up)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_bad_input_names_the_argument():
    gate, up = _data((4, 6), F32, 14), _data((4, 6), F32, 15)
    with pytest.raises(ValueError, match=r"gelu_mul: up shape \[4,3\] != gate shape \[4,6\]"):
        tg.gelu_mul(gate, up[:, :3])
    with pytest.raises(ValueError, match="gelu_mul: up"):
        tg.gelu_mul(gate, up.astype(np.float16))
    with pytest.raises(ValueError, match="gelu_mul: approximate must be \"none\" or \"tanh\", got \"erf\""):
        tg.gelu_mul(gate, up, "erf")
    with pytest.raises(TypeError, match="gelu_mul: approximate"):
        tg.gelu_mul(gate, up, 1)
    with pytest.raises(ValueError, match="gelu_mul: gate"):
        tg.gelu_mul(gate.astype(np.float64), up)
    with pytest.raises(ValueError, match="gelu_mul_backward: grad_output shape"):
        tg.gelu_mul_backward(gate[:, :3], gate, up)
    with pytest.raises(ValueError, match="gelu_mul_backward: grad_up"):
        tg.gelu_mul_backward(gate, gate, up, out=(None, np.empty((4, 6), np.float16)))
    with pytest.raises(ValueError, match="gelu_mul_backward: grad_up .*grad_gate"):
        d = np.empty((4, 6), np.float32)
        tg.gelu_mul_backward(gate, gate, up, out=(d, d))
