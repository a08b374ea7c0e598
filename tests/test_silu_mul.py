"""tg.silu_mul and tg.silu_mul_grad (the SwiGLU formula on two separate arrays) against the float64
SwiGLU reference of tests/reference/swi_glu.py applied to concatenate([gate, up]): every dtype, every
ISA, strided and in-place operands, thread counts, and bad input."""

import numpy as np
import pytest

import tilegrad as tg
from reference.swi_glu import BF16, F16, F32, assert_close, swi_glu_grad_ref, swi_glu_ref

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
SHAPES = [(7,), (4, 33), (3, 5, 130)]


def _pair(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return tuple((rng.standard_normal(shape) * 3).astype(dtype) for _ in range(2))


def _reference(gate, up, dy=None):
    """silu_mul is swi_glu of [gate | up] along a new last split: the reference on the concatenation."""
    x = np.concatenate([gate, up], axis=-1)
    if dy is None:
        return swi_glu_ref(x, -1)
    dx, scale = swi_glu_grad_ref(dy, x, -1)
    n = gate.shape[-1]
    return (dx[..., :n], scale[..., :n]), (dx[..., n:], scale[..., n:])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward(isa, dtype, shape):
    gate, up = _pair(shape, dtype, 1)
    out = tg.silu_mul(gate, up)
    assert out.dtype == dtype and out.shape == shape
    assert_close(out, *_reference(gate, up))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward(isa, dtype, shape):
    gate, up = _pair(shape, dtype, 2)
    dy = (np.random.default_rng(3).standard_normal(shape)).astype(dtype)
    d_gate, d_up = tg.silu_mul_grad(dy, gate, up)
    (want_g, scale_g), (want_u, scale_u) = _reference(gate, up, dy)
    assert d_gate.dtype == d_up.dtype == dtype
    assert_close(d_gate, want_g, scale_g)
    assert_close(d_up, want_u, scale_u)


def test_strided_operands_and_out_in_place():
    base = np.random.default_rng(4).standard_normal((16, 2 * 40)).astype(np.float32)
    gate, up = base[:, :40], base[:, 40:]  # two views into one projection output
    want = tg.silu_mul(np.ascontiguousarray(gate), np.ascontiguousarray(up))
    np.testing.assert_array_equal(tg.silu_mul(gate, up), want)
    np.testing.assert_array_equal(tg.silu_mul(gate.T.copy().T, up), want)
    g = gate.copy()
    assert tg.silu_mul(g, up, out=g) is g
    np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("count", [2, 3])
def test_threads_bit_identical(threads, count):
    gate, up = _pair((300, 1000), BF16, 5)
    dy = _pair((300, 1000), BF16, 6)[0]
    threads(1)
    one = tg.silu_mul(gate, up), *tg.silu_mul_grad(dy, gate, up)
    threads(count)
    many = tg.silu_mul(gate, up), *tg.silu_mul_grad(dy, gate, up)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_bad_input_names_the_argument():
    gate, up = _pair((4, 6), F32, 7)
    with pytest.raises(ValueError, match=r"silu_mul: up shape must equal gate shape \[4,6\], got \[4,3\]"):
        tg.silu_mul(gate, up[:, :3])
    with pytest.raises(ValueError, match="silu_mul: up"):
        tg.silu_mul(gate, up.astype(np.float16))
    with pytest.raises(ValueError, match="silu_mul: gate"):
        tg.silu_mul(gate.astype(np.float64), up.astype(np.float64))
    with pytest.raises(ValueError, match=r"silu_mul_grad: dy shape must equal gate shape"):
        tg.silu_mul_grad(gate[:2], gate, up)
    with pytest.raises(ValueError, match=r"silu_mul_grad: d_up"):
        tg.silu_mul_grad(gate, gate, up, out=(None, np.zeros((4, 6), np.float16)))
    shared = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="silu_mul_grad: d_up"):
        tg.silu_mul_grad(gate, gate, up, out=(shared, shared))
