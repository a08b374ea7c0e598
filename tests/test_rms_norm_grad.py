"""tg.rms_norm_grad (aclnnRmsNormGrad) against the float64 reference written from the vendor
document: dx and the fp32 dgamma over dtypes, gamma ranks, strides, rstd shapes, every ISA; dgamma
bit-identical for 1, 2 and 3 threads; empty rows (dgamma NaN); errors; PyTorch autograd cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference.rms_norm import (BF16, DGAMMA_REL, DX_ULPS, F16, F32, assert_close, rms_norm_grad_ref)
from helpers import normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]


def _inputs(shape, k, dtype, seed, gamma_dtype=None):
    x = normal(shape, dtype, seed, 2.0)
    g = normal(shape[-k:], gamma_dtype or dtype, seed + 1, 1.0)
    dy = normal(shape, dtype, seed + 2, 2.0)
    _, rstd = tg.rms_norm(x, g)
    return dy, x, rstd, g


def _check(dy, x, rstd, g, dx, dgamma):
    dxr, dgr, dxs, dgs = rms_norm_grad_ref(dy, x, rstd, g)
    assert dx.dtype == x.dtype and dx.shape == x.shape
    assert dgamma.dtype == F32 and dgamma.shape == g.shape
    assert_close(dx, dxr, dxs, DX_ULPS)
    assert (np.abs(dgamma - dgr) <= DGAMMA_REL * dgs + 1e-30).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", [((1,), 1), ((3, 1), 1), ((7, 129), 1), ((2, 3, 4, 8), 2), ((700, 40), 1),
                                     ((4, 6), 2), ((2, 3, 17), 3), ((5, 2048), 1)])
def test_matches_reference(isa, dtype, shape, k):
    dy, x, rstd, g = _inputs(shape, k, dtype, 1)
    dx, dgamma = tg.rms_norm_grad(dy, x, rstd, g)
    _check(dy, x, rstd, g, dx, dgamma)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["fp16", "bf16"])
def test_fp32_gamma_with_16bit_x(isa, dtype):
    dy, x, rstd, g = _inputs((33, 96), 1, dtype, 3, gamma_dtype=F32)
    _check(dy, x, rstd, g, *tg.rms_norm_grad(dy, x, rstd, g))


def test_rstd_shapes():
    dy, x, rstd, g = _inputs((2, 3, 4, 8), 1, F32, 5)
    want = tg.rms_norm_grad(dy, x, rstd, g)
    strided = np.zeros((2, 3, 4, 3), F32)
    strided[..., 1] = rstd.reshape(2, 3, 4)
    for r in (rstd.reshape(2, 3, 4), strided[..., 1], rstd.reshape(1, 2, 3, 4, 1)):
        got = tg.rms_norm_grad(dy, x, r, g)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_strided_and_out(isa):
    dy, x, rstd, g = _inputs((30, 64), 1, BF16, 7)
    dys, xs, rs, gs = dy[::3, ::-2], x[::3, ::-2], rstd[::3], g[::-2]
    dxbuf = np.zeros((10, 64), BF16)
    dx = dxbuf[:, 1::2]
    dgbuf = np.full(64, np.nan, F32)
    dg = dgbuf[::2]
    got = tg.rms_norm_grad(dys, xs, rs, gs, out=dx, dgamma_out=dg)
    assert got[0] is dx and got[1] is dg
    _check(dys, xs, rs, gs, dx, dg)
    assert (dxbuf[:, ::2].astype(F32) == 0).all() and np.isnan(dgbuf[1::2]).all()


@pytest.mark.parametrize("over", ["dy", "x"])
@pytest.mark.parametrize("shape", [(16, 80), (300, 200)])  # one sweep of rows; several per block
def test_in_place(over, shape):
    # dgamma sums dy * x * rstd over the rows: it must read them before dx overwrites them
    dy, x, rstd, g = _inputs(shape, 1, BF16, 9)
    want = tg.rms_norm_grad(dy, x, rstd, g)
    target = (dy if over == "dy" else x).copy()
    args = (target, x, rstd, g) if over == "dy" else (dy, target, rstd, g)
    got = tg.rms_norm_grad(*args, out=target)
    assert got[0] is target
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", [(4096, 64), (1000, 1000), (37, 5)])
def test_threads_bit_identical(threads, dtype, shape):
    dy, x, rstd, g = _inputs(shape, 1, dtype, 11)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append(tg.rms_norm_grad(dy, x, rstd, g))
    for dx, dg in results[1:]:
        np.testing.assert_array_equal(dx.view(np.uint8), results[0][0].view(np.uint8))
        np.testing.assert_array_equal(dg.view(np.uint32), results[0][1].view(np.uint32))


def test_dgamma_overwritten_and_empty_rows_nan():
    dy, x, rstd, g = _inputs((5, 8), 1, F32, 13)
    dg = np.full(8, 1e30, F32)
    tg.rms_norm_grad(dy, x, rstd, g, dgamma_out=dg)
    assert (np.abs(dg) < 1e3).all()
    e = np.zeros((0, 8), F32)
    dx, dg = tg.rms_norm_grad(e, e, np.zeros((0, 1), F32), g)
    assert dx.shape == (0, 8) and np.isnan(dg).all()


def test_matches_torch_autograd_fp32():
    torch = pytest.importorskip("torch")
    dy, x, rstd, g = _inputs((32, 256), 1, F32, 15)
    tx = torch.from_numpy(x).requires_grad_()
    tgm = torch.from_numpy(g).requires_grad_()
    torch.nn.functional.rms_norm(tx, (256,), tgm, 1e-6).backward(torch.from_numpy(dy))
    dx, dgamma = tg.rms_norm_grad(dy, x, rstd, g)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dgamma, tgm.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_errors():
    dy, x, rstd, g = _inputs((4, 8), 1, F32, 17)
    raises(tg.rms_norm_grad, ValueError, 161002, r"aclnnRmsNormGrad: x dtype float16 != dy dtype float32", dy,
           x.astype(F16), rstd, g)
    raises(tg.rms_norm_grad, ValueError, 161002, r"rstd dtype must be one of \{float32\}, got float16", dy, x,
           rstd.astype(F16), g)
    raises(tg.rms_norm_grad, ValueError, 161002, r"gamma dtype must be x's dtype \(float32\) or float32, got float16",
           dy, x, rstd,
           g.astype(F16))
    raises(tg.rms_norm_grad, ValueError, 561002, r"dy shape must equal x shape \[4,8\], got \[8,4\]", dy.T.copy(), x,
           rstd, g)
    raises(tg.rms_norm_grad, ValueError, 561002,
           r"rstd shape must be x's leading dims \[4\] \(size-1 dims aside\), got \[3,1\]",
           dy, x, rstd[:3], g)
    d4, x4, r4, g4 = _inputs((2, 3, 4, 8), 1, F32, 19)
    raises(tg.rms_norm_grad, ValueError, 561002,
           r"rstd shape must be x's leading dims \[2,3,4\] \(size-1 dims aside\), got \[24\]",
           d4, x4, r4.reshape(24), g4)
    raises(tg.rms_norm_grad, ValueError, 561002, r"gamma shape must equal the trailing dims of x \[8\], got \[4\]", dy,
           x, rstd, g[:4])
    raises(tg.rms_norm_grad, ValueError, 161002, r"dxOut dtype bfloat16 != x dtype float32", dy, x, rstd, g,
           out=np.zeros((4, 8), BF16))
    raises(tg.rms_norm_grad, ValueError, 561002, r"dxOut shape must equal x shape \[4,8\], got \[4,7\]", dy, x, rstd, g,
           out=np.zeros((4, 7), F32))
    raises(tg.rms_norm_grad, ValueError, 161002, r"dgammaOut dtype must be one of \{float32\}, got bfloat16", dy, x,
           rstd, g,
           dgamma_out=np.zeros(8, BF16))
    raises(tg.rms_norm_grad, ValueError, 561002, r"dgammaOut shape must equal gamma shape \[8\], got \[1,8\]", dy, x,
           rstd, g,
           dgamma_out=np.zeros((1, 8), F32))
    raises(tg.rms_norm_grad, ValueError, 161002, r"dgammaOut", dy, x, rstd, g, dgamma_out=dy.reshape(-1)[:8])
