"""tg.add_rms_norm (aclnnAddRmsNorm) and tg.add_rms_norm_backward against the float64 reference
written from the vendor document, over dtypes, gamma ranks, odd sizes, strides, every ISA, thread
counts, empty inputs, NaN / inf, aliases and the errors of bad input; PyTorch's autograd of
``F.rms_norm(x1 + x2)`` as a cross-check of the backward."""

import numpy as np
import pytest

import tilegrad as tg
from reference.add_rms_norm import add_ref, add_rms_norm_backward_ref, add_rms_norm_ref
from reference.rms_norm import BF16, DGAMMA_REL, DX_ULPS, F16, F32, RSTD_ULPS, Y_ULPS, assert_close
from helpers import normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
SHAPES = [((1,), 1), ((3, 1), 1), ((7, 129), 1), ((2, 3, 4, 8), 2), ((5, 2048), 1), ((4, 6), 2), ((2, 3, 17), 3),
          ((9, 33), 1)]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _inputs(shape, k, dtype, seed=1):
    return normal(shape, dtype, seed,
                  2.0), normal(shape, dtype, seed + 1, 2.0), normal(shape[-k:], dtype, seed + 2, 1.0)


def _check_forward(x1, x2, g, eps, y, rstd, x_out):
    yr, rr, ys, xr = add_rms_norm_ref(x1, x2, g, eps)
    assert y.dtype == x1.dtype and y.shape == x1.shape and x_out.dtype == x1.dtype and x_out.shape == x1.shape
    assert rstd.dtype == F32 and rstd.shape == rr.shape
    np.testing.assert_array_equal(_bits(x_out), _bits(xr))  # one rounding of the exact sum
    assert_close(y, yr, ys, Y_ULPS)
    assert_close(rstd, rr, rr, RSTD_ULPS)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", SHAPES)
def test_matches_reference(isa, dtype, shape, k):
    x1, x2, g = _inputs(shape, k, dtype)
    y, rstd, x_out = tg.add_rms_norm(x1, x2, g, 1e-5)
    _check_forward(x1, x2, g, 1e-5, y, rstd, x_out)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_equals_rms_norm_of_the_sum(isa, dtype):
    """The fusion changes no bit: y and rstd are tg.rms_norm of the rounded sum."""
    x1, x2, g = _inputs((13, 300), 1, dtype, 3)
    y, rstd, x_out = tg.add_rms_norm(x1, x2, g)
    want_y, want_r = tg.rms_norm(add_ref(x1, x2), g)
    np.testing.assert_array_equal(_bits(y), _bits(want_y))
    np.testing.assert_array_equal(_bits(rstd), _bits(want_r))


def test_strided_and_out(isa):
    base = normal((20, 3, 64), BF16, 7, 2.0)
    x1 = base[::2, 1, ::-2]  # rows strided, reversed: not dense
    x2 = normal((10, 32), BF16, 8, 2.0)
    g = normal(64, BF16, 9, 2.0)[::2]
    ybuf, xbuf = np.zeros((10, 64), BF16), np.zeros((10, 64), BF16)
    y, xo = ybuf[:, ::2], xbuf[:, 1::2]
    rbuf = np.zeros((10, 3), F32)
    rstd = rbuf[:, 1:2]
    got = tg.add_rms_norm(x1, x2, g, 1e-6, out=y, rstd_out=rstd, x_out=xo)
    assert got[0] is y and got[1] is rstd and got[2] is xo
    _check_forward(x1, x2, g, 1e-6, y, rstd, xo)
    assert (ybuf[:, 1::2] == 0).all() and (xbuf[:, ::2] == 0).all() and (rbuf[:, [0, 2]] == 0).all()


@pytest.mark.parametrize("strided", [False, True])
def test_in_place(strided):
    """x_out written over x1 (the residual stream updated in place) and y over x2."""
    x1, x2, g = _inputs((8, 48), 1, F16, 11)
    if strided:
        x1, x2 = np.asfortranarray(x1), np.asfortranarray(x2)
    want_y, want_r, want_x = tg.add_rms_norm(x1.copy(), x2.copy(), g)
    y, rstd, xo = tg.add_rms_norm(x1, x2, g, out=x2, x_out=x1)
    assert y is x2 and xo is x1
    np.testing.assert_array_equal(_bits(x1), _bits(want_x))
    np.testing.assert_array_equal(_bits(x2), _bits(want_y))
    np.testing.assert_array_equal(rstd, want_r)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threads_bit_identical(threads, dtype):
    x1, x2, g = _inputs((300, 1000), 1, dtype, 13)
    dy, dres = normal((300, 1000), dtype, 16, 2.0), normal((300, 1000), dtype, 17, 2.0)
    results = []
    for n in (1, 2, 3):
        threads(n)
        y, rstd, xo = tg.add_rms_norm(x1, x2, g)
        results.append((y, rstd, xo) + tg.add_rms_norm_backward(dy, xo, rstd, g, dres))
    for res in results[1:]:
        for got, want in zip(res, results[0]):
            np.testing.assert_array_equal(_bits(got), _bits(want))


def test_special_values():
    x1, x2 = normal((4, 8), F32, 15, 2.0), normal((4, 8), F32, 16, 2.0)
    x1[0, 1], x1[1, 2], x2[2, 3], x2[3, 0] = np.inf, np.nan, -np.inf, np.inf
    x1[3, 0] = -np.inf  # inf + -inf: NaN
    y, rstd, xo = tg.add_rms_norm(x1, x2, np.ones(8, F32))
    assert np.isposinf(xo[0, 1]) and np.isnan(xo[1, 2]) and np.isneginf(xo[2, 3]) and np.isnan(xo[3, 0])
    assert rstd[0, 0] == 0 and rstd[2, 0] == 0  # inf in the row: rstd 0, y NaN at the inf, 0 elsewhere
    assert np.isnan(rstd[1, 0]) and np.isnan(y[1]).all() and np.isnan(y[3]).all()
    zeros = np.zeros((2, 8), F32)
    y, rstd, _ = tg.add_rms_norm(zeros, zeros, np.ones(8, F32), 0.25)
    assert (y == 0).all() and (rstd == 2.0).all()


def test_fp16_sum_overflows_to_inf():
    x = np.full((1, 4), 60000, F16)
    _, _, xo = tg.add_rms_norm(x, x, np.ones(4, F16))
    assert np.isposinf(xo).all()


@pytest.mark.parametrize("shape,gshape", [((0, 8), (8,)), ((0, 3, 8), (3, 8)), ((3, 0), (0,))])
def test_empty(shape, gshape):
    x = np.zeros(shape, F32)
    y, rstd, xo = tg.add_rms_norm(x, x.copy(), np.ones(gshape, F32))
    k = len(gshape)
    assert y.shape == shape and xo.shape == shape and rstd.shape == shape[:-k] + (1,) * k


# ---- backward --------------------------------------------------------------------------------

def _check_backward(dy, xo, rstd, g, dres, dx, dgamma):
    dxr, dgr, dxs, dgs = add_rms_norm_backward_ref(dy, xo, rstd, g, dres)
    assert dx.dtype == xo.dtype and dx.shape == xo.shape and dgamma.dtype == F32 and dgamma.shape == g.shape
    assert_close(dx, dxr, dxs, DX_ULPS)
    bound = DGAMMA_REL * dgs + 1e-30
    assert (np.abs(dgamma.astype(np.float64) - dgr) <= bound).all()


@pytest.mark.parametrize("residual", [True, False], ids=["dresidual", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", SHAPES)
def test_backward_matches_reference(isa, dtype, shape, k, residual):
    x1, x2, g = _inputs(shape, k, dtype, 21)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy = normal(shape, dtype, 24, 2.0)
    dres = normal(shape, dtype, 25, 2.0) if residual else None
    dx, dgamma = tg.add_rms_norm_backward(dy, xo, rstd, g, dres)
    _check_backward(dy, xo, rstd, g, dres, dx, dgamma)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_backward_without_residual_is_rms_norm_grad(isa, dtype):
    x1, x2, g = _inputs((11, 200), 1, dtype, 31)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy = normal((11, 200), dtype, 34, 2.0)
    got = tg.add_rms_norm_backward(dy, xo, rstd, g)
    want = tg.rms_norm_grad(dy, xo, rstd, g)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(_bits(a), _bits(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_backward_residual_added_before_the_one_rounding(isa, dtype):
    """dx = round(t * rstd + dresidual) with t * rstd RmsNormGrad's float32 dx: within one rounding of
    the dtype (and the float32 one of t * rstd) of float32 rms_norm_grad + dresidual, never the two
    roundings of rms_norm_grad's 16-bit dx followed by a 16-bit add."""
    x1, x2, g = _inputs((6, 77), 1, dtype, 41)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy, dres = normal((6, 77), dtype, 44, 2.0), normal((6, 77), dtype, 45, 2.0)
    dx, _ = tg.add_rms_norm_backward(dy, xo, rstd, g, dres)
    plain32, _ = tg.rms_norm_grad(dy.astype(F32), xo.astype(F32), rstd, g.astype(F32))
    want = plain32.astype(np.float64) + dres.astype(np.float64)
    half_ulp = {F32: 2.0**-24, F16: 2.0**-11, BF16: 2.0**-8}[dtype]
    bound = half_ulp * np.abs(want) + 2.0**-23 * np.abs(plain32) + 2.0**-24 * 2.0**-14
    assert (np.abs(dx.astype(np.float64) - want) <= bound).all()


def test_backward_strided_and_in_place(isa):
    x1, x2, g = _inputs((10, 64), 1, BF16, 51)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy = normal((10, 128), BF16, 54, 2.0)[:, ::2]
    dres = normal((10, 64), BF16, 55, 2.0)
    want_dx, want_dg = tg.add_rms_norm_backward(np.ascontiguousarray(dy), xo, rstd, g, dres.copy())
    dres_t = np.asfortranarray(dres)
    dx, dg = tg.add_rms_norm_backward(dy, xo, rstd, g, dres_t, out=dres_t)  # dx over dresidual
    assert dx is dres_t
    np.testing.assert_array_equal(_bits(dx), _bits(want_dx))
    np.testing.assert_array_equal(dg, want_dg)


def test_backward_empty_rows_dgamma_nan():
    x = np.zeros((0, 8), F32)
    dx, dgamma = tg.add_rms_norm_backward(x, x, np.zeros((0, 1), F32), np.ones(8, F32), x)
    assert dx.shape == (0, 8) and np.isnan(dgamma).all()


def test_backward_nan_propagates():
    x1, x2, g = _inputs((3, 16), 1, F32, 61)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy, dres = normal((3, 16), F32, 64, 2.0), normal((3, 16), F32, 65, 2.0)
    dres[1, 4] = np.nan
    dx, dg = tg.add_rms_norm_backward(dy, xo, rstd, g, dres)
    assert np.isnan(dx[1, 4]) and np.isfinite(np.delete(dx.ravel(), 1 * 16 + 4)).all() and np.isfinite(dg).all()


@pytest.mark.parametrize("k", [1, 2])
def test_matches_torch_autograd(k):
    """Both x1 and x2 receive dx; the residual gradient flows through once."""
    torch = pytest.importorskip("torch")
    shape = (4, 6, 32)
    x1, x2, g = _inputs(shape, k, F32, 71)
    dy, dres = normal(shape, F32, 74, 2.0), normal(shape, F32, 75, 2.0)
    y, rstd, xo = tg.add_rms_norm(x1, x2, g, 1e-6)
    dx, dgamma = tg.add_rms_norm_backward(dy, xo, rstd, g, dres)
    t1, t2, tg_ = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x1, x2, g))
    s = t1 + t2
    ty = torch.nn.functional.rms_norm(s, g.shape, tg_, 1e-6)
    ((ty * torch.from_numpy(dy).double()).sum() + (s * torch.from_numpy(dres).double()).sum()).backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, t1.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, t2.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dgamma, tg_.grad.numpy(), rtol=1e-4, atol=1e-4)


# ---- bad input -------------------------------------------------------------------------------

def test_errors():
    x1, x2, g = _inputs((4, 8), 1, F32, 81)
    f = tg.add_rms_norm
    raises(f, ValueError, 161002, r"aclnnAddRmsNorm: x1 dtype must be one of \{float32, float16, bfloat16\}, got "
           r"float64", x1.astype(np.float64), x2, g)
    raises(f, ValueError, 161002, r"aclnnAddRmsNorm: x2 dtype float16 != x1 dtype float32", x1, x2.astype(F16), g)
    raises(f, ValueError, 161002, r"aclnnAddRmsNorm: gamma dtype bfloat16 != x1 dtype float32", x1, x2, g.astype(BF16))
    raises(f, ValueError, 161002, r"gamma dtype float32 != x1 dtype bfloat16", x1.astype(BF16), x2.astype(BF16), g)
    raises(f, ValueError, 161002, r"x2 shape must equal x1 shape \[4,8\], got \[4,7\]", x1, x2[:, :7], g)
    raises(f, ValueError, 161002, r"gamma shape must equal the trailing dims of x1 \[8\], got \[7\]", x1, x2, g[:7])
    raises(f, ValueError, 161002, r"gamma rank must be at most x1 rank 2, got 3", x1, x2, np.ones((1, 4, 8), F32))
    raises(f, ValueError, 161002, r"x1 rank must be in \[1, 8\], got 0", np.ones((), F32), np.ones((), F32), g)
    raises(f, ValueError, 161002, r"epsilon must be >= 0, got -1", x1, x2, g, -1.0)
    raises(f, ValueError, 161002, r"yOut dtype float16 != x1 dtype float32", x1, x2, g, out=np.zeros((4, 8), F16))
    raises(f, ValueError, 161002, r"xOut shape must equal x1 shape \[4,8\], got \[4,9\]", x1, x2, g,
           x_out=np.zeros((4, 9), F32))
    raises(f, ValueError, 161002, r"rstdOut shape must be x1's leading dims then ones \[4,1\], got \[4\]", x1, x2, g,
           rstd_out=np.zeros(4, F32))
    y = np.zeros((4, 8), F32)
    raises(f, ValueError, 161002, r"yOut", x1, x2, g, out=y, x_out=y)
    with pytest.raises(TypeError):
        tg.add_rms_norm(x1, x2, g, "1e-6")
    with pytest.raises(TypeError):
        tg.add_rms_norm([1.0] * 8, x2[0], g)


def test_backward_errors():
    x1, x2, g = _inputs((4, 8), 1, F32, 91)
    _, rstd, xo = tg.add_rms_norm(x1, x2, g)
    dy = normal((4, 8), F32, 94, 2.0)
    f = tg.add_rms_norm_backward
    raises(f, ValueError, 161002, r"add_rms_norm_backward: dresidual dtype float16 != x_out dtype float32", dy, xo,
           rstd, g, dy.astype(F16))
    raises(f, ValueError, 161002, r"add_rms_norm_backward: dresidual shape must equal x_out shape \[4,8\], got "
           r"\[4,7\]", dy, xo, rstd, g, dy[:, :7])
    raises(f, ValueError, 161002, r"add_rms_norm_backward: x dtype float16 != dy dtype float32", dy,
           xo.astype(F16), rstd, g)
    raises(f, ValueError, 561002, r"add_rms_norm_backward: rstd shape must be", dy, xo, rstd[:3], g)
    buf = np.zeros(40, F32)
    raises(f, ValueError, 161002, r"dresidual", dy, xo, rstd, g, buf[:32].reshape(4, 8),
           out=buf[4:36].reshape(4, 8))
    with pytest.raises(TypeError):
        f(dy, xo, rstd, g, [0.0] * 32)
