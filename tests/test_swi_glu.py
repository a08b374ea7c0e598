"""tg.swi_glu and tg.swi_glu_grad (aclnnSwiGlu, aclnnSwiGluGrad) against the float64 reference written
from the vendor documents, over dtypes, every dim, strides, every ISA, thread counts, extreme values,
empty inputs and bad input; PyTorch's autograd of F.silu(a) * b as a cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference.swi_glu import BF16, F16, F32, assert_close, swi_glu_grad_ref, swi_glu_ref
from helpers import half_shape, normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
CASES = [((2,), -1), ((4, 10), -1), ((4, 10), 0), ((3, 6, 5), 1), ((2, 3, 4, 130), 3), ((2, 3, 4, 130), -4),
         ((33, 2 * 1000), -1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,dim", CASES)
def test_forward(isa, dtype, shape, dim):
    x = normal(shape, dtype, 1, 3.0)
    out = tg.swi_glu(x, dim)
    assert out.dtype == dtype and out.shape == half_shape(shape, dim)
    assert_close(out, *swi_glu_ref(x, dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,dim", CASES)
def test_backward(isa, dtype, shape, dim):
    x = normal(shape, dtype, 2, 3.0)
    dy = normal(half_shape(shape, dim), dtype, 3, 3.0)
    dx = tg.swi_glu_grad(dy, x, dim)
    assert dx.dtype == dtype and dx.shape == x.shape
    assert_close(dx, *swi_glu_grad_ref(dy, x, dim))


def test_default_dim_is_last():
    x = normal((4, 8), F32, 4, 3.0)
    np.testing.assert_array_equal(tg.swi_glu(x), tg.swi_glu(x, 1))
    dy = normal((4, 4), F32, 5, 3.0)
    np.testing.assert_array_equal(tg.swi_glu_grad(dy, x), tg.swi_glu_grad(dy, x, -1))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_and_out(isa, dtype):
    x = normal((12, 40), dtype, 6, 3.0)[::2, ::-1]  # reversed rows, every other row
    outbuf = np.zeros((6, 40), dtype)
    out = outbuf[:, ::2]
    assert tg.swi_glu(x, -1, out=out) is out
    assert_close(out, *swi_glu_ref(x, -1))
    assert (outbuf[:, 1::2].astype(F32) == 0).all()
    dy = normal((40, 6), dtype, 7, 3.0).T[:, ::2]  # transposed + strided
    dxbuf = np.zeros((6, 80), dtype)
    dx = dxbuf[:, 1::2]
    assert tg.swi_glu_grad(dy, x, -1, out=dx) is dx
    assert_close(dx, *swi_glu_grad_ref(dy, x, -1))
    assert (dxbuf[:, ::2].astype(F32) == 0).all()


def test_grad_in_place_on_x():
    x = normal((7, 64), F32, 8, 3.0)
    dy = normal((7, 32), F32, 9, 3.0)
    want = tg.swi_glu_grad(dy, x)
    y = x.copy()
    assert tg.swi_glu_grad(dy, y, out=y) is y
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threads_bit_identical(threads, dtype):
    x = normal((64, 2 * 3000), dtype, 10, 3.0)
    dy = normal((64, 3000), dtype, 11, 3.0)
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append((tg.swi_glu(x), tg.swi_glu_grad(dy, x)))
    for out, dx in results[1:]:
        np.testing.assert_array_equal(out.view(np.uint8), results[0][0].view(np.uint8))
        np.testing.assert_array_equal(dx.view(np.uint8), results[0][1].view(np.uint8))


def test_extreme_values():
    a = np.array([-1e4, 1e4, -np.inf, np.inf, np.nan, 0.0, -0.0, -88.0, 88.0], F32)
    x = np.concatenate([a, np.full_like(a, 2.0)])
    out = tg.swi_glu(x)
    np.testing.assert_array_equal(out[:2], [-0.0, 2e4])
    assert np.isnan(out[4]) and out[5] == 0 and np.isfinite(out[[0, 1, 5, 6, 7, 8]]).all()
    dx = tg.swi_glu_grad(np.ones(9, F32), x)
    assert np.isfinite(dx[[0, 1, 5, 6, 7, 8, 9, 10, 14, 15, 16, 17]]).all()
    np.testing.assert_array_equal(dx[[1, 10]], [2.0, 1e4])


def test_empty():
    x = np.zeros((0, 8), F32)
    assert tg.swi_glu(x).shape == (0, 4)
    assert tg.swi_glu_grad(np.zeros((0, 4), F32), x).shape == (0, 8)
    assert tg.swi_glu(np.zeros((3, 0), F32)).shape == (3, 0)


def test_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    x = normal((16, 2 * 300), F32, 12, 3.0)
    dy = normal((16, 300), F32, 13, 3.0)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    a, b = tx.chunk(2, -1)
    ty = torch.nn.functional.silu(a) * b
    ty.backward(torch.from_numpy(dy))
    np.testing.assert_allclose(tg.swi_glu(x), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tg.swi_glu_grad(dy, x), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_forward_errors():
    x = normal((4, 6), F32, 14, 3.0)
    raises(tg.swi_glu, ValueError, 161002, r"aclnnSwiGlu: x dtype must be one of \{float32, float16, bfloat16\}, "
           r"got float64", x.astype(np.float64))
    raises(tg.swi_glu, ValueError, 561002, r"aclnnSwiGlu: dim must be in \[-2, 1\], got 2", x, 2)
    raises(tg.swi_glu, ValueError, 561002, r"aclnnSwiGlu: dim must be in \[-2, 1\], got -3", x, -3)
    raises(tg.swi_glu, ValueError, 561002, r"aclnnSwiGlu: x shape\[0\] must be even, got 3 \(shape \[3,6\]\)",
           x[:3], 0)
    raises(tg.swi_glu, ValueError, 561002, r"aclnnSwiGlu: x rank must be in \[1, 8\], got 0", np.ones((), F32))
    raises(tg.swi_glu, ValueError, 161002, r"aclnnSwiGlu: out dtype bfloat16 != x dtype float32", x,
           out=np.zeros((4, 3), BF16))
    raises(tg.swi_glu, ValueError, 561002, r"aclnnSwiGlu: out shape must be x shape with dim -1 halved \[4,3\], "
           r"got \[4,6\]", x, out=np.zeros((4, 6), F32))
    raises(tg.swi_glu, ValueError, 161002, "out", x, out=x[:, :3])  # overlaps x
    with pytest.raises(TypeError):
        tg.swi_glu(x, 1.0)


def test_backward_errors():
    x, dy = normal((4, 6), F32, 15, 3.0), normal((4, 3), F32, 16, 3.0)
    raises(tg.swi_glu_grad, ValueError, 161002, r"aclnnSwiGluGrad: x dtype float16 != yGrad dtype float32", dy,
           x.astype(F16))
    raises(tg.swi_glu_grad, ValueError, 161002, r"aclnnSwiGluGrad: out dtype float16 != x dtype float32", dy, x,
           out=np.zeros((4, 6), F16))
    raises(tg.swi_glu_grad, ValueError, 561002, r"aclnnSwiGluGrad: yGrad shape must be x shape with dim -1 halved "
           r"\[4,3\], got \[4,6\]", x, x)
    raises(tg.swi_glu_grad, ValueError, 561002, r"aclnnSwiGluGrad: yGrad shape must be x shape with dim -1 halved "
           r"\[4,3\], got \[3\]", dy[0], x)
    raises(tg.swi_glu_grad, ValueError, 561002, r"aclnnSwiGluGrad: dim must be in \[-2, 1\], got 5", dy, x, 5)
    raises(tg.swi_glu_grad, ValueError, 561002, r"aclnnSwiGluGrad: out shape must equal x shape \[4,6\], got \[4,3\]",
           dy, x, out=np.zeros((4, 3), F32))
    raises(tg.swi_glu_grad, ValueError, 161002, "out", dy, x, out=np.lib.stride_tricks.as_strided(
           np.zeros(24, F32), (4, 6), (0, 4)))
