"""tg.ge_glu and tg.ge_glu_backward (aclnnGeGluV3, aclnnGeGluV3Backward) against the float64
reference written from the vendor documents, over both forms, both directions (activate_left),
dtypes, every dim, odd sizes, strides, every ISA, thread counts, extreme values, empty inputs and
bad input; PyTorch's autograd of F.gelu(gate) * up as a cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference.gelu import BF16, F16, F32, assert_close, ge_glu_backward_ref, ge_glu_ref
from helpers import half_shape, normal, raises

DTYPES = [F32, F16, BF16]
IDS = ["fp32", "fp16", "bf16"]
FORMS = ["none", "tanh"]
CASES = [((2,), -1), ((4, 10), -1), ((4, 10), 0), ((3, 6, 5), 1), ((2, 3, 4, 130), 3), ((2, 3, 4, 130), -4),
         ((33, 2 * 1001), -1)]


@pytest.mark.parametrize("left", [False, True], ids=["right", "left"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,dim", CASES)
def test_forward_and_backward(isa, left, form, dtype, shape, dim):
    x = normal(shape, dtype, 1, 3.0)
    out, out_gelu = tg.ge_glu(x, dim, form, left)
    assert out.dtype == out_gelu.dtype == dtype and out.shape == out_gelu.shape == half_shape(shape, dim)
    (want, scale), (want_gelu, scale_gelu) = ge_glu_ref(x, dim, form, left)
    assert_close(out, want, scale)
    assert_close(out_gelu, want_gelu, scale_gelu)
    dy = normal(half_shape(shape, dim), dtype, 2, 1.0)
    dx = tg.ge_glu_backward(dy, x, out_gelu, dim, form, left)
    assert dx.dtype == dtype and dx.shape == x.shape
    assert_close(dx, *ge_glu_backward_ref(dy, x, out_gelu, dim, form, left))


def test_defaults_are_the_vendors():
    """dim -1, tanh, the right half activated (aclnnGeGluV3's operator defaults)."""
    x = normal((4, 8), F32, 3, 3.0)
    out, g = tg.ge_glu(x)
    a, b = x[:, :4], x[:, 4:]
    np.testing.assert_array_equal(g, tg.gelu(b, "tanh"))
    np.testing.assert_array_equal(tg.ge_glu(x, -1, "tanh", False)[0], out)
    dy = normal((4, 4), F32, 4, 3.0)
    np.testing.assert_array_equal(tg.ge_glu_backward(dy, x, g), tg.ge_glu_backward(dy, x, g, -1, "tanh", False))
    assert_close(out, a.astype(np.float64) * tg.gelu(b, "tanh").astype(np.float64),
                 np.abs(a.astype(np.float64) * g), 2.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_and_out(isa, dtype):
    x = normal((12, 40), dtype, 5, 3.0)[::2, ::-1]
    buf, gbuf = np.zeros((6, 40), dtype), np.zeros((40, 6), dtype)
    out, out_gelu = buf[:, ::2], gbuf[::-2].T  # stepped, and reversed + transposed
    r = tg.ge_glu(x, -1, "none", True, out=out, out_gelu=out_gelu)
    assert r[0] is out and r[1] is out_gelu
    (want, scale), (wg, sg) = ge_glu_ref(x, -1, "none", True)
    assert_close(out, want, scale)
    assert_close(out_gelu, wg, sg)
    assert (buf[:, 1::2].astype(F32) == 0).all() and (gbuf[-2::-2].astype(F32) == 0).all()
    dy = normal((20, 6), dtype, 6, 3.0).T
    dxbuf = np.zeros((6, 80), dtype)
    dx = dxbuf[:, 1::2]
    assert tg.ge_glu_backward(dy, x, out_gelu, -1, "none", True, out=dx) is dx
    assert_close(dx, *ge_glu_backward_ref(dy, x, out_gelu, -1, "none", True))
    assert (dxbuf[:, ::2].astype(F32) == 0).all()


def test_backward_in_place_on_x():
    x = normal((7, 64), F32, 8, 3.0)
    dy = normal((7, 32), F32, 9, 3.0)
    _, g = tg.ge_glu(x, -1, "tanh", True)
    want = tg.ge_glu_backward(dy, x, g, -1, "tanh", True)
    y = x.copy()
    assert tg.ge_glu_backward(dy, y, g, -1, "tanh", True, out=y) is y
    np.testing.assert_array_equal(y, want)


def test_backward_uses_the_given_gelu():
    """The linear half's gradient is dy * gelu as passed (the vendor's contract), not recomputed."""
    x = normal((3, 8), F32, 10, 3.0)
    dy = np.ones((3, 4), F32)
    g = np.full((3, 4), 2.5, F32)
    dx = tg.ge_glu_backward(dy, x, g, -1, "tanh", True)
    np.testing.assert_array_equal(dx[:, 4:], g)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_threads_bit_identical(threads, dtype):
    x = normal((64, 2 * 3001), dtype, 11, 3.0)
    dy = normal((64, 3001), dtype, 12, 3.0)
    results = []
    for n in (1, 2, 3):
        threads(n)
        r = []
        for form in FORMS:
            out, g = tg.ge_glu(x, -1, form, True)
            r += [out, g, tg.ge_glu_backward(dy, x, g, -1, form, True)]
        results.append(r)
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("form", FORMS)
def test_extreme_values(form):
    h = np.array([-np.inf, np.inf, np.nan, 0.0, -1e30, 1e30, -100.0, 100.0], F32)
    x = np.concatenate([h, np.full_like(h, 2.0)])
    out, g = tg.ge_glu(x, -1, form, True)
    assert np.isnan(out[[0, 2]]).all() and np.isnan(g[[0, 2]]).all()
    np.testing.assert_array_equal(out[[1, 3, 4, 5, 6, 7]], np.array([np.inf, 0, 0, 1e30, 0, 100], F32) * 2)
    dx = tg.ge_glu_backward(np.ones(8, F32), x, g, -1, form, True)
    np.testing.assert_array_equal(dx[[0, 1, 4, 5, 6, 7]], [0, 2, 0, 2, 0, 2])
    np.testing.assert_array_equal(dx[8 + np.array([1, 3, 4, 5, 6, 7])], g[[1, 3, 4, 5, 6, 7]])


def test_empty():
    x = np.zeros((0, 8), F32)
    out, g = tg.ge_glu(x)
    assert out.shape == g.shape == (0, 4)
    assert tg.ge_glu_backward(np.zeros((0, 4), F32), x, g).shape == (0, 8)
    assert tg.ge_glu(np.zeros((3, 0), BF16))[0].shape == (3, 0)


@pytest.mark.parametrize("form", FORMS)
def test_matches_torch_autograd(form):
    """Gemma's MLP: gelu(gate) * up with [gate | up] along the last dim."""
    torch = pytest.importorskip("torch")
    x = normal((16, 2 * 300), F32, 13, 3.0)
    dy = normal((16, 300), F32, 14, 3.0)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    gate, up = tx.chunk(2, -1)
    ty = torch.nn.functional.gelu(gate, approximate=form) * up
    ty.backward(torch.from_numpy(dy))
    out, g = tg.ge_glu(x, -1, form, True)
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=2e-6, atol=2e-6)
    # PyTorch's tanh gradient cancels in the negative tail (test_gelu.py::test_matches_torch): |dy * up|
    # times ~1e-6 there
    atol = 1e-4 if form == "tanh" else 1e-5
    np.testing.assert_allclose(tg.ge_glu_backward(dy, x, g, -1, form, True), tx.grad.numpy(), rtol=1e-5, atol=atol)


def test_forward_errors():
    x = normal((4, 6), F32, 15, 3.0)
    op = "aclnnGeGluV3"
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: self dtype must be one of \{{float32, float16, bfloat16\}}, "
           r"got float64", x.astype(np.float64))
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: dim must be in \[-2, 1\], got 2", x, 2)
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: self shape\[0\] must be even, got 3 \(shape \[3,6\]\)", x[:3], 0)
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: self rank must be in \[1, 8\], got 0", np.ones((), F32))
    raises(tg.ge_glu, ValueError, 161002, rf'{op}: approximate must be "none" or "tanh", got "exact"', x, -1,
           "exact")
    raises(tg.ge_glu, TypeError, None, rf"{op}: activate_left must be a bool, got 1", x, -1, "tanh", 1)
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: out dtype bfloat16 != self dtype float32", x,
           out=np.zeros((4, 3), BF16))
    raises(tg.ge_glu, ValueError, 161002, rf"{op}: outGelu shape must be self shape with dim -1 halved \[4,3\], "
           r"got \[4,6\]", x, out_gelu=np.zeros((4, 6), F32))
    raises(tg.ge_glu, ValueError, 161002, "out", x, out=x[:, :3])  # overlaps x
    buf = np.zeros((4, 3), F32)
    raises(tg.ge_glu, ValueError, 161002, "outGelu", x, out=buf, out_gelu=buf)  # the outputs overlap


def test_backward_errors():
    x, dy = normal((4, 6), F32, 16, 3.0), normal((4, 3), F32, 17, 3.0)
    g = tg.ge_glu(x)[1]
    op = "aclnnGeGluV3Backward"
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: self dtype float16 != gradOutput dtype float32", dy,
           x.astype(F16), g)
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: gelu dtype bfloat16 != gradOutput dtype float32", dy,
           x, g.astype(BF16))
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: gradInput dtype float16 != gradOutput dtype float32",
           dy, x, g, out=np.zeros((4, 6), F16))
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: gradOutput shape must be self shape with dim -1 halved "
           r"\[4,3\], got \[4,6\]", x, x, g)
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: gelu shape must be self shape with dim 0 halved "
           r"\[2,6\], got \[4,3\]", np.zeros((2, 6), F32), x, g, 0)
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: dim must be in \[-2, 1\], got 5", dy, x, g, 5)
    raises(tg.ge_glu_backward, ValueError, 161002, rf"{op}: gradInput shape \[4,3\] != self shape \[4,6\]", dy, x,
           g, out=np.zeros((4, 3), F32))
    raises(tg.ge_glu_backward, ValueError, 161002, "gradInput", dy, x, g, out=np.lib.stride_tricks.as_strided(
           np.zeros(24, F32), (4, 6), (0, 4)))
