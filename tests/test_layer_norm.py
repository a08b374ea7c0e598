"""tg.layer_norm / tg.layer_norm_backward (aclnnLayerNorm, aclnnLayerNormBackward) against the float64
reference written from the vendor documents (tests/reference/layer_norm.py): every dtype, weight and
bias present or absent, normalized ranks, rows not a multiple of the vector width, strides, every ISA;
outputMask combinations; dweight / dbias bit-identical for 1, 2 and 3 threads; empty tensors; errors;
torch's F.layer_norm and its autograd as a second reference. The C ABI: test_layer_norm_c_abi.py."""

import numpy as np
import pytest

import tilegrad as tg
from reference.layer_norm import (BF16, DX_ULPS, F16, F32, OUT_ULPS, PARAM_REL, STAT_ULPS, assert_close,
                                  layer_norm_backward_ref, layer_norm_ref)

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
# (shape, k): rows of 1, 3, 7, 15, 17, 129, 1000 elements: below, between and above the 4-, 8- and
# 16-lane vector widths and their four-vector unrolls
SHAPES = [((1,), 1), ((3, 1), 1), ((7, 129), 1), ((2, 3, 4, 8), 2), ((5, 3, 5), 2), ((9, 17), 1),
          ((2, 3, 7), 3), ((40, 1000), 1), ((6, 64), 1)]


def _data(shape, dtype, seed, scale=2.0, offset=0.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + offset).astype(dtype)


def _params(ns, dtype, seed, weight, bias):
    w = _data(ns, dtype, seed + 1, 0.5, 1.0) if weight else None
    b = _data(ns, dtype, seed + 2, 0.5) if bias else None
    return w, b


def _check_forward(x, ns, w, b, eps, out, mean, rstd):
    want, wmean, wrstd, scale, mscale = layer_norm_ref(x, ns, w, b, eps)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert mean.dtype == F32 and rstd.dtype == F32 and mean.shape == wmean.shape and rstd.shape == wrstd.shape
    assert_close(out, want, scale, OUT_ULPS, "out")
    assert_close(mean, wmean, mscale, STAT_ULPS, "mean")
    assert_close(rstd, wrstd, np.abs(wrstd), STAT_ULPS, "rstd")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", SHAPES)
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)],
                         ids=["wb", "w", "b", "none"])
def test_forward_matches_reference(isa, dtype, shape, k, weight, bias):
    x = _data(shape, dtype, 1, offset=0.5)
    ns = list(shape[-k:])
    w, b = _params(ns, dtype, 1, weight, bias)
    _check_forward(x, ns, w, b, 1e-5, *tg.layer_norm(x, ns, w, b, 1e-5))


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["fp16", "bf16"])
def test_forward_fp32_params_with_16bit_input(isa, dtype):
    x = _data((33, 96), dtype, 3)
    w, b = _params([96], F32, 3, True, True)
    _check_forward(x, [96], w, b, 1e-6, *tg.layer_norm(x, 96, w, b, 1e-6))


def test_forward_large_mean_keeps_variance():
    # a row of mean 1e4 and spread 1: E[x^2] - E[x]^2 in fp32 would lose every digit of the variance
    x = _data((8, 300), F32, 5, scale=1.0, offset=1e4)
    _check_forward(x, [300], None, None, 1e-5, *tg.layer_norm(x, [300]))


def test_forward_strided_and_out(isa):
    x = _data((30, 64), BF16, 7)
    w, b = _params([64], BF16, 7, True, True)
    xs, ws, bs = x[::3, ::-2], w[::-2], b[::2]
    buf = np.zeros((10, 64), BF16)
    out = buf[:, 1::2]
    mean = np.full((10, 2), np.nan, F32)[:, :1]
    got = tg.layer_norm(xs, [32], ws, bs, 1e-5, out=out, mean_out=mean)
    assert got[0] is out and got[1] is mean
    _check_forward(xs, [32], ws, bs, 1e-5, *got)
    assert (buf[:, ::2].astype(F32) == 0).all()


def test_forward_in_place():
    x = _data((16, 80), F32, 9)
    want = tg.layer_norm(x, [80])
    got = tg.layer_norm(x, [80], out=x)
    assert got[0] is x
    np.testing.assert_array_equal(x, want[0])


def test_forward_stats_in_input_dtype():
    x = _data((6, 40), BF16, 10)
    mean, rstd = np.zeros((6, 1), BF16), np.zeros((6,), BF16)
    tg.layer_norm(x, [40], mean_out=mean, rstd_out=rstd)
    _, wmean, wrstd, _, _ = layer_norm_ref(x, [40])
    assert_close(mean, wmean, np.abs(wmean), STAT_ULPS, "mean", BF16)
    assert_close(rstd, wrstd.reshape(6), np.abs(wrstd.reshape(6)), STAT_ULPS, "rstd", BF16)


def _backward_inputs(shape, k, dtype, seed, weight=True, bias=True):
    x = _data(shape, dtype, seed, offset=0.25)
    dy = _data(shape, dtype, seed + 3)
    ns = list(shape[-k:])
    w, b = _params(ns, dtype, seed, weight, bias)
    _, mean, rstd = tg.layer_norm(x, ns, w, b)
    return dy, x, ns, mean, rstd, w, b


def _check_backward(dy, x, ns, mean, rstd, w, dx, dw, db, mask=(True, True, True)):
    wdx, wdw, wdb, dxs, dws, dbs = layer_norm_backward_ref(dy, x, ns, mean, rstd, w)
    if mask[0]:
        assert dx.dtype == x.dtype and dx.shape == x.shape
        assert_close(dx, wdx, dxs, DX_ULPS, "dx")
    else:
        assert dx is None
    for got, want, scale, on, what in ((dw, wdw, dws, mask[1], "dweight"), (db, wdb, dbs, mask[2], "dbias")):
        if not on:
            assert got is None
            continue
        assert got.dtype == F32 and list(got.shape) == ns
        err = np.abs(got.astype(np.float64) - want)
        assert (err <= PARAM_REL * scale + 1e-30).all(), f"{what}: worst {err.max()}"


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", SHAPES)
@pytest.mark.parametrize("weight", [True, False], ids=["w", "no_w"])
def test_backward_matches_reference(isa, dtype, shape, k, weight):
    dy, x, ns, mean, rstd, w, b = _backward_inputs(shape, k, dtype, 1, weight=weight)
    _check_backward(dy, x, ns, mean, rstd, w, *tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b))


@pytest.mark.parametrize("mask", [(a, b, c) for a in (True, False) for b in (True, False) for c in (True, False)],
                         ids=lambda m: "".join("1" if v else "0" for v in m))
def test_backward_output_masks(mask):
    dy, x, ns, mean, rstd, w, b = _backward_inputs((37, 45), 1, F32, 2)
    got = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b, output_mask=mask)
    _check_backward(dy, x, ns, mean, rstd, w, *got, mask=mask)


def test_backward_masked_outputs_left_alone():
    dy, x, ns, mean, rstd, w, b = _backward_inputs((5, 8), 1, F32, 3)
    dx, dw = np.full(x.shape, 7.0, F32), np.full(8, 7.0, F32)
    got = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b, output_mask=(False, False, True), dx_out=dx,
                                 dweight_out=dw)
    assert got[0] is None and got[1] is None
    assert (dx == 7).all() and (dw == 7).all()


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["fp16", "bf16"])
def test_backward_fp32_weight_and_narrow_param_grads(dtype):
    dy, x, ns, mean, rstd, _, _ = _backward_inputs((21, 70), 1, dtype, 4)
    w = _data(ns, F32, 44, 0.5, 1.0)
    dw, db = np.zeros(70, F32), np.zeros(70, F32)
    dx, dw, db = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, None, dweight_out=dw, dbias_out=db)
    _check_backward(dy, x, ns, mean, rstd, w, dx, dw, db)
    w16 = w.astype(dtype)
    dw16, db16 = np.zeros(70, dtype), np.zeros(70, dtype)
    tg.layer_norm_backward(dy, x, ns, mean, rstd, w16, dweight_out=dw16, dbias_out=db16)
    _, wdw, wdb, _, dws, dbs = layer_norm_backward_ref(dy, x, ns, mean, rstd, w16)
    assert_close(dw16, wdw, dws * 8, 1.0, "dweight", dtype)
    assert_close(db16, wdb, dbs * 8, 1.0, "dbias", dtype)


def test_backward_stats_shapes_and_dtypes():
    dy, x, ns, mean, rstd, w, b = _backward_inputs((2, 3, 4, 8), 1, F32, 5)
    want = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b)
    strided = np.zeros((2, 3, 4, 3), F32)
    strided[..., 1] = rstd.reshape(2, 3, 4)
    for m, r in ((mean.reshape(2, 3, 4), rstd.reshape(2, 3, 4)), (mean, strided[..., 1]),
                 (mean.reshape(1, 2, 3, 4, 1), rstd.reshape(1, 2, 3, 4, 1))):
        for a, e in zip(tg.layer_norm_backward(dy, x, ns, m, r, w, b), want):
            np.testing.assert_array_equal(a, e)


def test_backward_strided_and_in_place(isa):
    dy, x, ns, mean, rstd, w, b = _backward_inputs((30, 64), 1, BF16, 7)
    dys, xs, ms, rs = dy[::3, ::-2], x[::3, ::-2], mean[::3], rstd[::3]
    ws = w[::-2]
    buf = np.zeros((10, 64), BF16)
    dx = buf[:, 1::2]
    got = tg.layer_norm_backward(dys, xs, [32], ms, rs, ws, None, dx_out=dx)
    assert got[0] is dx
    _check_backward(dys, xs, [32], ms, rs, ws, *got)
    assert (buf[:, ::2].astype(F32) == 0).all()
    dy2, x2, ns2, m2, r2, w2, b2 = _backward_inputs((16, 80), 1, F32, 9)
    want = tg.layer_norm_backward(dy2, x2, ns2, m2, r2, w2, b2)
    got = tg.layer_norm_backward(dy2, x2, ns2, m2, r2, w2, b2, dx_out=dy2)
    assert got[0] is dy2
    for a, e in zip(got, want):  # dweight / dbias read dy before dx overwrites it
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("over", ["dy", "x"])
def test_backward_in_place_many_rows(over):
    # rows enough for several sweeps per block: every parameter sum must see dy and x before dx
    dy, x, ns, mean, rstd, w, b = _backward_inputs((300, 200), 1, BF16, 5)
    want = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b)
    target = (dy if over == "dy" else x).copy()
    args = (target, x, ns, mean, rstd, w, b) if over == "dy" else (dy, target, ns, mean, rstd, w, b)
    got = tg.layer_norm_backward(*args, dx_out=target)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_param_grads_without_dx_are_the_same_bits(dtype):
    # without dx the rows are read once, row by row; with dx the sums run over sweeps of rows: the
    # same fp32 operations in the same row order
    dy, x, ns, mean, rstd, w, b = _backward_inputs((333, 520), 1, dtype, 3)
    full = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b)
    params = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b, output_mask=(False, True, True))
    for a, e in zip(params[1:], full[1:]):
        np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", [(4096, 64), (1000, 1000), (37, 5)])
def test_threads_bit_identical(threads, dtype, shape):
    dy, x, ns, mean, rstd, w, b = _backward_inputs(shape, 1, dtype, 11)
    forwards, backwards = [], []
    for n in (1, 2, 3):
        threads(n)
        forwards.append(tg.layer_norm(x, ns, w, b))
        backwards.append(tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b))
    for fwd, bwd in zip(forwards[1:], backwards[1:]):
        for a, e in zip(fwd + bwd, forwards[0] + backwards[0]):
            np.testing.assert_array_equal(a.view(np.uint8), e.view(np.uint8))


def test_empty_tensors():
    e = np.zeros((0, 8), F32)
    out, mean, rstd = tg.layer_norm(e, [8])
    assert out.shape == (0, 8) and mean.shape == (0, 1)
    z = np.zeros((3, 0), F32)
    out, mean, rstd = tg.layer_norm(z, [0])
    assert out.shape == (3, 0) and (mean == 0).all() and np.isnan(rstd).all()
    dw, db = np.full(8, 5.0, F32), np.full(8, 5.0, F32)
    dx, dw, db = tg.layer_norm_backward(e, e, [8], np.zeros((0, 1), F32), np.zeros((0, 1), F32),
                                        dweight_out=dw, dbias_out=db)
    assert dx.shape == (0, 8) and (dw == 0).all() and (db == 0).all()


def test_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(32, 7, 200, dtype=torch.float64).to(dtype)
        w = (torch.randn(200) * 0.5 + 1).to(dtype).requires_grad_()
        b = (torch.randn(200) * 0.5).to(dtype).requires_grad_()
        dy = torch.randn(32, 7, 200).to(dtype)
        tx = x.clone().requires_grad_()
        y = F.layer_norm(tx, (200,), w, b, 1e-5)
        y.backward(dy)
        npx = x.float().numpy().astype(F32) if dtype == torch.float32 else x.view(torch.int16).numpy().view(BF16)
        npw = w.detach().float().numpy().astype(npx.dtype)
        npb = b.detach().float().numpy().astype(npx.dtype)
        npdy = dy.float().numpy().astype(npx.dtype)
        out, mean, rstd = tg.layer_norm(npx, [200], npw, npb, 1e-5)
        dx, dw, db = tg.layer_norm_backward(npdy, npx, [200], mean, rstd, npw, npb)
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(out.astype(F32), y.detach().float().numpy(), **tol)
        np.testing.assert_allclose(dx.astype(F32), tx.grad.float().numpy(), **tol)
        if dtype == torch.float32:  # torch rounds bf16 parameter gradients to bf16 (the float64 reference
            # covers tilegrad's fp32 ones)
            np.testing.assert_allclose(dw, w.grad.numpy(), rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(db, b.grad.numpy(), rtol=1e-4, atol=1e-3)


def _raises(fn, exc, code, match, *args, **kw):
    with pytest.raises(exc, match=match) as e:
        fn(*args, **kw)
    assert e.value.code == code


def test_forward_errors():
    x = _data((4, 8), F32, 17)
    w, b = _params([8], F32, 17, True, True)
    ln = tg.layer_norm
    _raises(ln, ValueError, 161002, r"aclnnLayerNorm: normalizedShape must equal the trailing dims of input \[8\], "
            r"got \[4\]", x, [4])
    _raises(ln, ValueError, 161002, r"normalizedShape must have 1 to input rank \(2\) dims, got \[2,4,8\]", x,
            [2, 4, 8])
    _raises(ln, ValueError, 161002, r"normalizedShape must have 1 to input rank \(2\) dims, got \[\]", x, [])
    _raises(ln, ValueError, 161002, r"weightOptional shape must equal normalizedShape \[8\], got \[4\]", x, [8], w[:4])
    _raises(ln, ValueError, 161002, r"biasOptional dtype must be input's \(float32\) or float32, got float16", x, [8],
            None, b.astype(F16))
    _raises(ln, ValueError, 161002, r"biasOptional dtype bfloat16 != weightOptional dtype float32",
            x.astype(BF16), [8], w, b.astype(BF16))
    _raises(ln, ValueError, 161002, r"input dtype must be one of", x.astype(np.float64), [8])
    _raises(ln, ValueError, 161002, r"eps must be finite and >= 0, got -1", x, [8], eps=-1.0)
    _raises(ln, ValueError, 161002, r"out dtype float16 != input dtype float32", x, [8], out=np.zeros((4, 8), F16))
    _raises(ln, ValueError, 161002, r"out shape must equal input shape \[4,8\], got \[4,7\]", x, [8],
            out=np.zeros((4, 7), F32))
    _raises(ln, ValueError, 161002, r"meanOutOptional shape must be input's leading dims \[4\] \(size-1 dims aside\), "
            r"got \[3,1\]", x, [8], mean_out=np.zeros((3, 1), F32))
    _raises(ln, ValueError, 161002, r"rstdOutOptional dtype must be float32 or input's \(float32\), got float16", x,
            [8], rstd_out=np.zeros((4, 1), F16))
    _raises(ln, TypeError, 161002, r"aclnnLayerNorm: normalized_shape\[0\] must be an int, got 8.0", x, [8.0])
    _raises(ln, TypeError, 161002, r"aclnnLayerNorm: eps must be a float, got 'a'", x, [8], eps="a")


def test_backward_errors():
    dy, x, ns, mean, rstd, w, b = _backward_inputs((4, 8), 1, F32, 19)
    lb = tg.layer_norm_backward
    _raises(lb, ValueError, 161002, r"aclnnLayerNormBackward: gradOut dtype float16 != input dtype float32",
            dy.astype(F16), x, ns, mean, rstd)
    _raises(lb, ValueError, 161002, r"gradOut shape must equal input shape \[4,8\], got \[8,4\]", dy.T.copy(), x,
            ns, mean, rstd)
    _raises(lb, ValueError, 161002, r"mean shape must be input's leading dims \[4\] \(size-1 dims aside\), got \[3\]",
            dy, x, ns, mean[:3, 0], rstd)
    _raises(lb, ValueError, 161002, r"rstd dtype float16 != mean dtype float32", dy.astype(F16), x.astype(F16), ns,
            mean, rstd.astype(F16))
    _raises(lb, ValueError, 161002, r"gradWeightOut dtype must be float32 or float32, got float16", dy, x, ns, mean,
            rstd, w, dweight_out=np.zeros(8, F16))
    _raises(lb, ValueError, 161002, r"gradBiasOut shape must equal normalizedShape \[8\], got \[1,8\]", dy, x, ns,
            mean, rstd, w, dbias_out=np.zeros((1, 8), F32))
    _raises(lb, ValueError, 161002, r"gradInputOut", dy, x, ns, mean, rstd, dx_out=dy[:, ::-1])
    _raises(lb, ValueError, 161002, r"output_mask must be three bools", dy, x, ns, mean, rstd,
            output_mask=(True, True))
    _raises(lb, TypeError, 161002, r"output_mask\[1\] must be a bool, got 1", dy, x, ns, mean, rstd,
            output_mask=(True, 1, True))
