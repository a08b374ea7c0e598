"""tg.gelu and tg.gelu_backward (aclnnGeluV2, aclnnGeluBackwardV2) against the float64 reference
written from the vendor documents, over both forms, dtypes, odd sizes, strides, broadcasting, every
ISA, thread counts, extreme values, empty inputs and bad input; PyTorch's F.gelu and
aten.gelu_backward as a cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference.gelu import BF16, F16, F32, assert_close, gelu_backward_ref, gelu_ref
from helpers import normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
FORMS = ["none", "tanh"]
SHAPES = [(), (1,), (7,), (4, 33), (3, 5, 129), (2, 3, 4, 1001)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward(isa, form, dtype, shape):
    x = normal(shape, dtype, 1, 3.0)
    y = tg.gelu(x, form)
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y, *gelu_ref(x, form))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward(isa, form, dtype, shape):
    x = normal(shape, dtype, 2, 3.0)
    dy = normal(shape, dtype, 3, 1.0)
    dx = tg.gelu_backward(dy, x, form)
    assert dx.dtype == dtype and dx.shape == x.shape
    assert_close(dx, *gelu_backward_ref(dy, x, form))


@pytest.mark.parametrize("form", FORMS)
def test_dense_sweep_fp32(isa, form):
    """Every region of both forms: the tails (down to where the result underflows), zero, the
    derivative's root near -0.75 and the saturated ends."""
    x = np.concatenate([np.linspace(-20, 20, 40001), np.geomspace(1e-30, 1e3, 2000),
                        -np.geomspace(1e-30, 1e3, 2000)]).astype(F32)
    assert_close(tg.gelu(x, form), *gelu_ref(x, form))
    dy = np.ones_like(x)
    assert_close(tg.gelu_backward(dy, x, form), *gelu_backward_ref(dy, x, form))


def test_default_is_erf():
    x = normal((5, 7), F32, 4, 3.0)
    np.testing.assert_array_equal(tg.gelu(x), tg.gelu(x, "none"))
    np.testing.assert_array_equal(tg.gelu_backward(x, x), tg.gelu_backward(x, x, "none"))
    assert not np.array_equal(tg.gelu(x, "tanh"), tg.gelu(x, "none"))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_and_out(isa, form, dtype):
    x = normal((12, 40), dtype, 5, 3.0)[::2, ::-1]
    outbuf = np.zeros((6, 80), dtype)
    out = outbuf[:, ::2]
    assert tg.gelu(x, form, out=out) is out
    assert_close(out, *gelu_ref(x, form))
    assert (outbuf[:, 1::2].astype(F32) == 0).all()
    dy = normal((40, 6), dtype, 6, 3.0).T
    dxbuf = np.zeros((6, 80), dtype)
    dx = dxbuf[:, 1::2]
    assert tg.gelu_backward(dy, x, form, out=dx) is dx
    assert_close(dx, *gelu_backward_ref(dy, x, form))
    assert (dxbuf[:, ::2].astype(F32) == 0).all()


def test_in_place():
    x = normal((9, 31), F32, 7, 3.0)
    want = tg.gelu(x, "tanh")
    y = x.copy()
    assert tg.gelu(y, "tanh", out=y) is y
    np.testing.assert_array_equal(y, want)
    dy = normal((9, 31), F32, 8, 3.0)
    want = tg.gelu_backward(dy, x)
    g = dy.copy()
    assert tg.gelu_backward(g, x, out=g) is g
    np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("form", FORMS)
def test_backward_broadcast_and_mixed_dtypes(form):
    x = normal((4, 1, 6), BF16, 9, 3.0)
    dy = normal((5, 1), F32, 10, 3.0)
    dx = tg.gelu_backward(dy, x, form)
    assert dx.dtype == F32 and dx.shape == (4, 5, 6)
    assert_close(dx, *gelu_backward_ref(dy, x, form))
    dx16 = tg.gelu_backward(dy.astype(F16), x, form)
    assert dx16.dtype == F32
    assert_close(dx16, *gelu_backward_ref(dy.astype(F16), x, form))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threads_bit_identical(threads, dtype):
    x = normal((64, 3001), dtype, 11, 3.0)
    dy = normal((64, 3001), dtype, 12, 3.0)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append([tg.gelu(x, f) for f in FORMS] + [tg.gelu_backward(dy, x, f) for f in FORMS])
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_size_does_not_change_values():
    x = normal(70001, F32, 13, 3.0)
    for form in FORMS:
        whole, part = tg.gelu(x, form), tg.gelu(x[:37], form)
        np.testing.assert_array_equal(whole[:37], part)


@pytest.mark.parametrize("form", FORMS)
def test_extreme_values(form):
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -1e30, 1e30, -3e38, 3e38, -100.0, 100.0, 1e-40], F32)
    y = tg.gelu(x, form)
    assert np.isnan(y[0]) and y[1] == np.inf and np.isnan(y[2])
    np.testing.assert_array_equal(y[[3, 4, 5, 7, 9]], [0.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(y[[6, 8, 10]], x[[6, 8, 10]])
    assert np.signbit(y[[4, 5, 7, 9]]).all()
    assert y[11] == np.float32(1e-40) * np.float32(0.5)
    dx = tg.gelu_backward(np.ones_like(x), x, form)
    # the saturated ends: 0 for -inf, 1 for +inf (the limits), NaN kept
    np.testing.assert_array_equal(dx[[0, 1, 5, 6, 7, 8, 9, 10]], [0, 1, 0, 1, 0, 1, 0, 1])
    assert np.isnan(dx[2]) and abs(dx[3] - 0.5) <= 2**-24


def test_empty():
    for form in FORMS:
        assert tg.gelu(np.zeros((0, 8), F32), form).shape == (0, 8)
        assert tg.gelu_backward(np.zeros((3, 0), BF16), np.zeros((1, 0), BF16), form).shape == (3, 0)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_matches_torch(form, dtype):
    torch = pytest.importorskip("torch")
    x = normal((16, 301), dtype, 14, 3.0)
    dy = normal((16, 301), dtype, 15, 3.0)
    tdt = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}[dtype]
    tx = torch.from_numpy(x.astype(F32)).to(tdt)
    tdy = torch.from_numpy(dy.astype(F32)).to(tdt)
    # PyTorch computes in float32 too; the two round once each, so they may differ by one ulp. Its
    # tanh gradient forms 1 + tanh(u), which cancels in the negative tail (it is exactly 0 below
    # x = -5, where the true value is about -1e-6): an absolute error up to ~1e-6 |dy| there, which
    # tilegrad's sigmoid form does not have (the float64 reference above holds it to a few ulp).
    tol = {F32: 2e-6, F16: 1e-3, BF16: 8e-3}[dtype]
    want = torch.nn.functional.gelu(tx.float(), approximate=form).to(tdt).float().numpy()
    np.testing.assert_allclose(tg.gelu(x, form).astype(F32), want, rtol=tol, atol=tol)
    want = torch.ops.aten.gelu_backward(tdy.float(), tx.float(), approximate=form).to(tdt).float().numpy()
    atol = max(tol, 2e-5) if form == "tanh" else tol
    np.testing.assert_allclose(tg.gelu_backward(dy, x, form).astype(F32), want, rtol=tol, atol=atol)


def test_forward_errors():
    x = normal((4, 6), F32, 16, 3.0)
    raises(tg.gelu, ValueError, 161002, r"aclnnGeluV2: x dtype must be one of \{float32, float16, bfloat16\}, "
           r"got float64", x.astype(np.float64))
    raises(tg.gelu, ValueError, 161002, r'aclnnGeluV2: approximate must be "none" or "tanh", got "erf"', x, "erf")
    raises(tg.gelu, TypeError, None, r"aclnnGeluV2: approximate must be a str, got 1", x, 1)
    raises(tg.gelu, ValueError, 161002, r"aclnnGeluV2: y dtype bfloat16 != x dtype float32", x,
           out=np.zeros((4, 6), BF16))
    raises(tg.gelu, ValueError, 161002, r"aclnnGeluV2: y shape \[4,5\] != x shape \[4,6\]", x,
           out=np.zeros((4, 5), F32))
    raises(tg.gelu, ValueError, 161002, r"aclnnGeluV2: x rank must be at most 8, got 9", np.zeros((1,) * 9, F32))
    raises(tg.gelu, ValueError, 161002, "y", x, out=x[:, ::-1])  # overlaps x other than exactly
    with pytest.raises(TypeError):
        tg.gelu([1.0, 2.0])


def test_backward_errors():
    x, dy = normal((4, 6), F32, 17, 3.0), normal((4, 6), F32, 18, 3.0)
    raises(tg.gelu_backward, ValueError, 161002, r"aclnnGeluBackwardV2: gradInput dtype must be float32 "
           r"\(gradOutput float32, self float32\), got float16", dy, x, out=np.zeros((4, 6), F16))
    raises(tg.gelu_backward, ValueError, 161002, r"aclnnGeluBackwardV2: gradInput dtype must be float32 "
           r"\(gradOutput float16, self bfloat16\), got float16", dy.astype(F16), x.astype(BF16),
           out=np.zeros((4, 6), F16))
    raises(tg.gelu_backward, ValueError, 161002, r"aclnnGeluBackwardV2: gradOutput shape \[4,5\] and self shape "
           r"\[4,6\]", dy[:, :5], x)
    raises(tg.gelu_backward, ValueError, 161002, r"aclnnGeluBackwardV2: gradInput shape \[4,5\] != broadcast of "
           r"gradOutput \[4,6\] and self \[4,6\] = \[4,6\]", dy, x, out=np.zeros((4, 5), F32))
    raises(tg.gelu_backward, ValueError, 161002, r'aclnnGeluBackwardV2: approximate must be "none" or "tanh", '
           r'got "Tanh"', dy, x, "Tanh")
    raises(tg.gelu_backward, ValueError, 161002, "self dtype must be one of", dy, x.astype(np.int32))
