"""tg.rms_norm (aclnnRmsNorm) against the float64 reference written from the vendor document, over
dtypes, gamma ranks, strides, every ISA, thread counts, epsilon, empty inputs, in-place and the
errors of bad input; PyTorch's F.rms_norm as a cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference.rms_norm import BF16, F16, F32, RSTD_ULPS, Y_ULPS, assert_close, rms_norm_ref
from helpers import normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]


def _check(x, g, eps, y, rstd):
    yr, rr, ys = rms_norm_ref(x, g, eps)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert rstd.dtype == F32 and rstd.shape == rr.shape
    assert_close(y, yr, ys, Y_ULPS)
    assert_close(rstd, rr, rr, RSTD_ULPS)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", [((1,), 1), ((3, 1), 1), ((7, 129), 1), ((2, 3, 4, 8), 2), ((5, 2048), 1),
                                     ((4, 6), 2), ((2, 3, 17), 3)])
def test_matches_reference(isa, dtype, shape, k):
    x, g = normal(shape, dtype, 1, 2.0), normal(shape[-k:], dtype, 2, 1.0)
    y, rstd = tg.rms_norm(x, g, 1e-5)
    _check(x, g, 1e-5, y, rstd)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["fp16", "bf16"])
def test_fp32_gamma_with_16bit_x(isa, dtype):
    x, g = normal((9, 100), dtype, 3, 2.0), normal(100, F32, 4, 2.0)
    y, rstd = tg.rms_norm(x, g)
    assert y.dtype == dtype
    _check(x, g, 1e-6, y, rstd)


def test_single_rounding_bf16():
    """y = round((x * rstd) * gamma) once: equal to the fp32 result rounded to bf16 (1 ulp slack for
    the fp32 evaluation order), not HF's double rounding."""
    x, g = normal((64, 256), BF16, 5, 2.0), normal(256, BF16, 6, 2.0)
    y, _ = tg.rms_norm(x, g)
    y32, _ = tg.rms_norm(x.astype(F32), g.astype(F32))
    diff = np.abs(y.astype(np.float64) - y32.astype(BF16).astype(np.float64))
    assert (diff <= np.abs(y32) * 2.0**-8 + 1e-30).all()


def test_strided_and_out(isa):
    base = normal((20, 3, 64), F32, 7, 2.0)
    x = base[::2, 1, ::-2]  # rows strided, row reversed (not dense)
    g = normal(64, F32, 8, 2.0)[::2]
    ybuf = np.full((10, 64), np.nan, F32)
    y = ybuf[:, ::2]
    rbuf = np.zeros((10, 3), F32)
    rstd = rbuf[:, 1:2]
    got_y, got_r = tg.rms_norm(x, g, 1e-6, out=y, rstd_out=rstd)
    assert got_y is y and got_r is rstd
    _check(x, g, 1e-6, y, rstd)
    assert np.isnan(ybuf[:, 1::2]).all() and (rbuf[:, [0, 2]] == 0).all()


def test_dense_rows_with_strided_leading_dims(isa):
    x = normal((6, 4, 32), BF16, 9, 2.0).transpose(1, 0, 2)  # rows dense, leading dims permuted
    g = normal(32, F32, 10, 2.0)
    y, rstd = tg.rms_norm(x, g)
    _check(x, g, 1e-6, y, rstd)


def test_in_place():
    x = normal((8, 48), F16, 11, 2.0)
    g = normal(48, F16, 12, 2.0)
    ref_y, _ = tg.rms_norm(x, g)
    y, _ = tg.rms_norm(x, g, out=x)
    assert y is x
    np.testing.assert_array_equal(x.view(np.uint16), ref_y.view(np.uint16))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threads_bit_identical(threads, dtype):
    x, g = normal((300, 1000), dtype, 13, 2.0), normal(1000, dtype, 14, 2.0)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append(tg.rms_norm(x, g))
    for y, r in results[1:]:
        np.testing.assert_array_equal(y.view(np.uint8), results[0][0].view(np.uint8))
        np.testing.assert_array_equal(r.view(np.uint8), results[0][1].view(np.uint8))


def test_epsilon_and_special_values():
    x = np.zeros((2, 8), F32)
    y, rstd = tg.rms_norm(x, np.ones(8, F32), 0.25)
    assert (y == 0).all() and np.allclose(rstd, 2.0)
    y, rstd = tg.rms_norm(x, np.ones(8, F32), 0.0)  # 0 * inf: NaN, as the vendor's formula
    assert np.isinf(rstd).all() and np.isnan(y).all()
    x = normal((3, 8), F32, 15, 2.0)
    x[0, 1], x[1, 2] = np.inf, np.nan
    y, rstd = tg.rms_norm(x, np.ones(8, F32))
    assert np.isnan(y[1]).all() and np.isnan(rstd[1]).all()
    assert rstd[0, 0] == 0 and np.isfinite(y[2]).all()


def test_empty_rows():
    x = np.zeros((0, 3, 8), F32)
    y, rstd = tg.rms_norm(x, np.ones(8, F32))
    assert y.shape == (0, 3, 8) and rstd.shape == (0, 3, 1)


def test_matches_torch_fp32():
    torch = pytest.importorskip("torch")
    x, g = normal((16, 512), F32, 16, 2.0), normal(512, F32, 17, 2.0)
    y, _ = tg.rms_norm(x, g, 1e-6)
    ty = torch.nn.functional.rms_norm(torch.from_numpy(x), (512,), torch.from_numpy(g), 1e-6).numpy()
    np.testing.assert_allclose(y, ty, rtol=2e-6, atol=2e-6)


# ---- bad input -------------------------------------------------------------------------------

def test_errors():
    x, g = normal((4, 8), F32, 18, 2.0), normal(8, F32, 19, 2.0)
    raises(tg.rms_norm, ValueError, 161002,
           r"aclnnRmsNorm: x dtype must be one of \{float32, float16, bfloat16\}, got float64",
           x.astype(np.float64), g)
    raises(tg.rms_norm, ValueError, 161002, r"gamma dtype must be x's dtype \(float32\) or float32, got bfloat16", x,
           g.astype(BF16))
    raises(tg.rms_norm, ValueError, 161002, r"gamma dtype must be x's dtype \(bfloat16\) or float32, got float16",
           x.astype(BF16), g.astype(F16))
    raises(tg.rms_norm, ValueError, 561002, r"gamma shape must equal the trailing dims of x \[8\], got \[7\]", x, g[:7])
    raises(tg.rms_norm, ValueError, 561002, r"gamma rank must be at most x rank 2, got 3", x, np.ones((1, 4, 8), F32))
    raises(tg.rms_norm, ValueError, 561002, r"x rank must be in \[1, 8\], got 0", np.ones((), F32), g)
    raises(tg.rms_norm, ValueError, 561002, r"gamma must not be empty", np.zeros((2, 0), F32), np.zeros(0, F32))
    raises(tg.rms_norm, ValueError, 561002, r"epsilon must be >= 0, got -1", x, g, -1.0)
    raises(tg.rms_norm, ValueError, 561002, r"epsilon must be >= 0, got nan", x, g, float("nan"))
    raises(tg.rms_norm, ValueError, 161002, r"yOut dtype float16 != x dtype float32", x, g, out=np.zeros((4, 8), F16))
    raises(tg.rms_norm, ValueError, 561002, r"yOut shape must equal x shape \[4,8\], got \[4,9\]", x, g,
           out=np.zeros((4, 9), F32))
    raises(tg.rms_norm, ValueError, 161002, r"rstdOut dtype must be one of \{float32\}, got float16", x, g,
           rstd_out=np.zeros((4, 1), F16))
    raises(tg.rms_norm, ValueError, 561002, r"rstdOut shape must be x's leading dims then ones \[4,1\], got \[4\]", x,
           g,
           rstd_out=np.zeros(4, F32))
    with pytest.raises(TypeError):
        tg.rms_norm(x, g, "1e-6")
    with pytest.raises(TypeError):
        tg.rms_norm([1.0, 2.0], g)


def test_overlap_errors():
    x, g = normal((4, 8), F32, 20, 2.0), normal(8, F32, 21, 2.0)
    buf = np.zeros(40, F32)
    raises(tg.rms_norm, ValueError, 161002, "yOut", x, g, out=np.lib.stride_tricks.as_strided(buf, (4, 8), (4, 0)))
    raises(tg.rms_norm, ValueError, 161002, "rstdOut", x, g, out=buf[:32].reshape(4, 8),
           rstd_out=buf[30:34].reshape(4, 1))
