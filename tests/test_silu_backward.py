"""tilegrad.silu_backward through Python: accuracy against the float64 reference (reference/silu.py)
over dtypes, mixed dtypes, shapes, broadcasting, strides, in-place and extreme inputs at every ISA
level; errors (exception class, message, .code); a cross-check with torch where installed."""

import re

import numpy as np
import pytest

import tilegrad as tg
from reference.silu import BF16, F16, F32, assert_silu_close, silu_backward_ref, ulp
from helpers import raises

DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]
MIXED = [(a, b) for a in DTYPES for b in DTYPES if a != b]
MIXED_IDS = [f"{DTYPE_IDS[DTYPES.index(a)]}-{DTYPE_IDS[DTYPES.index(b)]}" for a, b in MIXED]


def sample_x(rng, shape, dtype=F32):
    """Mostly |x| < 12 (where the gradient varies) plus a spread out to +-100."""
    n = int(np.prod(shape, dtype=np.int64))
    x = rng.standard_normal(n) * 3.0
    wide = rng.random(n) < 0.15
    x[wide] = rng.uniform(-100, 100, wide.sum())
    return x.reshape(shape).astype(dtype)


def sample_dy(rng, shape, dtype=F32):
    n = int(np.prod(shape, dtype=np.int64))
    return rng.uniform(-3, 3, n).reshape(shape).astype(dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- dtypes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_same_dtype(isa, rng, dtype):
    for n in (1, 7, 16, 31, 64, 1037, 70001):
        dy, x = sample_dy(rng, (n,), dtype), sample_x(rng, (n,), dtype)
        got = tg.silu_backward(dy, x)
        assert got.dtype == dtype and got.shape == (n,) and got.flags.c_contiguous
        assert_silu_close(got, dy, x)


def test_dense_grid_fp32(isa):
    """Every 1/256 step through [-30, 30] and every 1/8 step through [-110, 90]: the whole curve."""
    x = np.concatenate([np.arange(-30, 30, 1 / 256), np.arange(-110, 90, 1 / 8)]).astype(F32)
    dy = np.ones_like(x)
    assert_silu_close(tg.silu_backward(dy, x), dy, x)
    assert_silu_close(tg.silu_backward(-2.5 * dy, x), -2.5 * dy, x)


def test_every_fp16_and_bf16_input(isa):
    """All finite fp16 and bf16 values of x with dy = 1 and dy = -0.75."""
    h = np.arange(65536, dtype=np.uint16).view(F16)
    h = h[np.isfinite(h)]
    b = np.arange(65536, dtype=np.uint16).view(BF16)
    b = b[np.isfinite(b.astype(F32))]
    for x in (h, b):
        for v in (1.0, -0.75):
            dy = np.full(x.shape, v, x.dtype)
            assert_silu_close(tg.silu_backward(dy, x), dy, x)


@pytest.mark.parametrize("dy_dtype,x_dtype", MIXED, ids=MIXED_IDS)
def test_mixed_dtypes_give_fp32(isa, rng, dy_dtype, x_dtype):
    dy, x = sample_dy(rng, (5, 211), dy_dtype), sample_x(rng, (5, 211), x_dtype)
    got = tg.silu_backward(dy, x)
    assert got.dtype == F32
    assert_silu_close(got, dy, x)
    out = np.full((5, 211), np.nan, F32)
    assert tg.silu_backward(dy, x, out=out) is out
    assert_silu_close(out, dy, x)
    # broadcast across the two dtypes too
    got = tg.silu_backward(dy[:1], x)
    assert_silu_close(got, dy[:1], x)


# ---- shapes ----------------------------------------------------------------------------------

SHAPES = [(), (0,), (3, 0, 2), (1,), (5,), (13, 17), (5, 1, 3), (2, 1, 3, 1, 2, 2, 1, 3), (3, 2, 2, 3, 2, 2, 3, 5),
          (100003,)]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_shapes(isa, rng, shape, dtype):
    dy, x = sample_dy(rng, shape, dtype), sample_x(rng, shape, dtype)
    got = tg.silu_backward(dy, x)
    assert got.shape == shape and got.dtype == dtype
    assert_silu_close(got, dy, x)
    out = np.empty(shape, dtype)
    assert tg.silu_backward(dy, x, out=out) is out
    assert_silu_close(out, dy, x)


def test_empty_output_is_not_touched_and_0d_written():
    x = np.zeros((0, 5), F32)
    out = np.zeros((0, 5), F32)
    assert tg.silu_backward(x, x, out=out).shape == (0, 5)
    dy, xs = np.array(2.0, F32), np.array(1.5, F32)
    got = tg.silu_backward(dy, xs)
    assert got.shape == () and got.dtype == F32
    assert_silu_close(got, dy, xs)


# ---- broadcasting ----------------------------------------------------------------------------

BROADCASTS = [((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), (4,)), ((), (5,)), ((6,), ()), ((2, 1, 3), (4, 1)),
              ((1,), (6, 7)), ((7, 1, 1, 9), (1, 5, 3, 1)), ((2, 1, 1, 1, 1, 1, 1, 40), (3, 1, 1, 1, 1, 1, 1))]


@pytest.mark.parametrize("dy_shape,x_shape", BROADCASTS, ids=[f"{a}-{b}" for a, b in BROADCASTS])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_broadcasting(isa, rng, dy_shape, x_shape, dtype):
    dy, x = sample_dy(rng, dy_shape, dtype), sample_x(rng, x_shape, dtype)
    shape = np.broadcast_shapes(dy_shape, x_shape)
    got = tg.silu_backward(dy, x)
    assert got.shape == shape
    assert_silu_close(got, dy, x)
    out = np.empty(shape, dtype)[..., ::-1] if shape else np.empty(shape, dtype)
    tg.silu_backward(dy, x, out=out)
    assert_silu_close(out, dy, x)


def test_broadcast_output_matches_explicit_expansion(isa, rng):
    dy, x = sample_dy(rng, (64, 1)), sample_x(rng, (1, 300))
    a = tg.silu_backward(dy, x)
    b = tg.silu_backward(np.ascontiguousarray(np.broadcast_to(dy, (64, 300))),
                         np.ascontiguousarray(np.broadcast_to(x, (64, 300))))
    np.testing.assert_array_equal(a, b)


# ---- strides ---------------------------------------------------------------------------------

def _views(a):
    """Non-contiguous views of a 2-d array: transposed, reversed rows/cols, stepped, both."""
    return {
        "transposed": a.T,
        "reversed": a[::-1, ::-1].T,
        "neg_inner": a[:, ::-1],
        "stepped": a[::2, ::3],
        "stepped_neg": a[::-3, 1::2],
    }


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_strided_inputs_and_outputs(isa, rng, dtype):
    base_dy = sample_dy(rng, (60, 90), dtype)
    base_x = sample_x(rng, (60, 90), dtype)
    vdy, vx = _views(base_dy), _views(base_x)
    for name in vdy:
        dy, x = vdy[name], vx[name]
        expect_shape = dy.shape
        # strided inputs, fresh output
        assert_silu_close(tg.silu_backward(dy, x), dy, x)
        # contiguous inputs, strided output of the same layout
        outbuf = np.full((60, 90), 7, dtype)
        out = _views(outbuf)[name]
        tg.silu_backward(np.ascontiguousarray(dy), np.ascontiguousarray(x), out=out)
        assert out.shape == expect_shape
        assert_silu_close(out, dy, x)
        # elements of the buffer outside the view are untouched
        mask = np.ones((60, 90), bool)
        _views(mask)[name][...] = False
        assert (outbuf[mask].astype(F32) == 7).all()
    # one strided input, the other contiguous, output transposed
    dy, x = base_dy[:, ::-1], np.ascontiguousarray(base_x)
    out = np.empty((90, 60), dtype).T
    tg.silu_backward(dy, x, out=out)
    assert_silu_close(out, dy, x)


def test_zero_stride_inputs(isa, rng):
    x = np.broadcast_to(sample_x(rng, (1, 50)), (40, 50))
    dy = np.broadcast_to(np.float32(1.25), (40, 50))
    assert_silu_close(tg.silu_backward(dy, x), dy, x)


def test_strided_8d(isa, rng):
    a = sample_x(rng, (3, 4, 2, 5, 2, 3, 2, 6))
    b = sample_dy(rng, (3, 4, 2, 5, 2, 3, 2, 6))
    x = a.transpose(7, 1, 5, 3, 0, 2, 6, 4)[::-1, :, ::2]
    dy = b.transpose(7, 1, 5, 3, 0, 2, 6, 4)[:, ::-1, ::2]
    out = np.empty(x.shape[::-1], F32).T[::-1]
    tg.silu_backward(dy, x, out=out)
    assert_silu_close(out, dy, x)


def test_large_strided_crosses_pack_buffers(isa, rng):
    """Strided operands go through fixed-size pack buffers: rows longer than one buffer, odd tails."""
    x = sample_x(rng, (3, 2 * 1500 + 1))[:, ::2]
    dy = sample_dy(rng, (3, 1501))
    out = np.empty((1501, 3), F32).T
    tg.silu_backward(dy, x, out=out)
    assert_silu_close(out, dy, x)


# ---- in place ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("target", ["grad_output", "input"])
def test_in_place(isa, rng, dtype, target):
    for make in (lambda a: a, lambda a: a[::-1], lambda a: a.reshape(37, 27).T):
        dy0, x0 = sample_dy(rng, (999,), dtype), sample_x(rng, (999,), dtype)
        dy, x = make(dy0.copy()), make(x0.copy())
        ref_dy, ref_x = make(dy0), make(x0)
        out = dy if target == "grad_output" else x
        assert tg.silu_backward(dy, x, out=out) is out
        assert_silu_close(out, ref_dy, ref_x)


def test_in_place_mixed_dtypes(isa, rng):
    """Mixed inputs write fp32: the fp32 input itself may be the output."""
    for dy_dtype in (F16, BF16):
        dy = sample_dy(rng, (3, 333), dy_dtype)
        x0 = sample_x(rng, (3, 333), F32)
        x = x0.copy()
        assert tg.silu_backward(dy, x, out=x) is x
        assert_silu_close(x, dy, x0)
        g0 = sample_dy(rng, (3, 333), F32)
        g = g0.copy()
        assert tg.silu_backward(g, sample_x(rng, (3, 333), dy_dtype), out=g) is g


# ---- extremes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_extremes(isa, dtype):
    big = 1e4 if dtype != F16 else 6e4  # fp16's largest finite values too
    x = np.array([-big, big, -1e4, 1e4, np.inf, -np.inf, np.nan, -100, -90, 88, 89, 100], np.float64)
    x = x.astype(dtype)
    dy = np.full(x.shape, 1.5, dtype)
    got = tg.silu_backward(dy, x).astype(np.float64)
    assert got[0] == 0 and np.signbit(got[0]) and got[2] == 0 and np.signbit(got[2])  # -0
    assert got[1] == 1.5 and got[3] == 1.5  # dy
    assert np.isnan(got[4:7]).all()  # inf, -inf, NaN -> NaN
    assert np.isfinite(got[7:]).all()
    assert_silu_close(got.astype(dtype), dy, x)
    # sign of dy carries through the -0 / dy cases; NaN in dy propagates
    dy2 = np.array([-2, -2, np.nan, 0], dtype)
    x2 = np.array([-1e4, 1e4, 1.0, 1e4], dtype)
    got2 = tg.silu_backward(dy2, x2).astype(np.float64)
    assert got2[0] == 0 and not np.signbit(got2[0])  # -2 * -0 = +0
    assert got2[1] == -2 and np.isnan(got2[2]) and got2[3] == 0


def test_subnormal_results_fp32(isa):
    """x around -100 gives subnormal float32 results (s = sigmoid(x) ~ 4e-44); they stay nonzero,
    negative, and within the subnormal allowance of the reference."""
    x = np.linspace(-103, -87.5, 4001).astype(F32)
    dy = np.ones_like(x)
    got = tg.silu_backward(dy, x)
    ref, _ = silu_backward_ref(dy, x)
    assert (got < 0).all() and (np.abs(got) < 1e-36).all()
    assert_silu_close(got, dy, x)
    # s is quantised to 2^-149: relative error ~ 2^-150 / s, 33% at x = -103 but < 1e-3 from x = -95 on
    m = x >= -95
    assert np.abs(got[m].astype(np.float64) / ref[m] - 1).max() < 1e-3


def test_large_dy_does_not_overflow_spuriously(isa):
    x = np.array([0.0, 1.0, -1.0, 5.0, 30.0], F32)
    dy = np.full(x.shape, 3e38, F32)
    got = tg.silu_backward(dy, x)
    assert np.isfinite(got[[0, 2]]).all()
    assert_silu_close(got[[0, 2]], dy[[0, 2]], x[[0, 2]])


# ---- results independent of threads and ISA bookkeeping ------------------------------------------

def test_threads_bit_identical(isa, threads, rng):
    dy, x = sample_dy(rng, (300001,)), sample_x(rng, (300001,))
    threads(1)
    a = tg.silu_backward(dy, x)
    threads(2)
    b = tg.silu_backward(dy, x)
    threads(7)
    c = tg.silu_backward(dy[::-1], x[::-1])[::-1]
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    np.testing.assert_array_equal(a.view(np.uint32), c.view(np.uint32))


@pytest.mark.parametrize("dtype,offset", [(F32, 0), (F32, 4), (F16, 2), (BF16, 1)],
                         ids=["fp32", "fp32-off4", "fp16-off2", "bf16-off1"])
def test_streaming_store_size_output(isa, dtype, offset):
    """Large enough (> the L3 the tiling assumes) that the kernel streams the output with
    non-temporal stores, into outputs at every alignment (even unaligned to the element): the
    result equals, bit for bit, the same computation done in small cached chunks."""
    from tilegrad import _core
    n = _core.platform()["l3_bytes"] // (3 * dtype.itemsize) + 4099
    x = np.linspace(-20, 20, n, dtype=F32).astype(dtype)
    dy = np.cos(np.linspace(0, 50, n, dtype=F32)).astype(dtype)
    raw = np.empty(n * dtype.itemsize + 64 + offset, np.uint8)
    base = (-raw.ctypes.data) % 64 + offset
    out = raw[base:base + n * dtype.itemsize].view(dtype)
    tg.silu_backward(dy, x, out=out)
    chunk = 1 << 20
    for i in range(0, n, chunk):
        expect = tg.silu_backward(dy[i:i + chunk], x[i:i + chunk])
        np.testing.assert_array_equal(out[i:i + chunk].view(np.uint8), expect.view(np.uint8))
    idx = np.r_[0:100, n // 2 - 50:n // 2 + 50, n - 100:n]
    assert_silu_close(out[idx], dy[idx], x[idx])


# ---- errors ---------------------------------------------------------------------------------------

def test_error_dtypes():
    f = np.zeros(4, F32)
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("aclnnSiluBackward: gradOutput dtype must be one of {float32, float16, bfloat16}, got int32"),
           np.zeros(4, np.int32), f)
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("self dtype must be one of {float32, float16, bfloat16}, got float64"), f, np.zeros(4))
    raises(tg.silu_backward, ValueError, 161002, re.escape("gradInput dtype float16 != self dtype float32"), f, f,
           out=np.zeros(4, F16))
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("gradOutput dtype float16 != self dtype bfloat16, so gradInput must be float32, got bfloat16"),
           np.zeros(4, F16), np.zeros(4, BF16), out=np.zeros(4, BF16))
    raises(tg.silu_backward, ValueError, 161002, re.escape("grad_output dtype complex64 is not supported"),
           np.zeros(4, np.complex64), f)
    raises(tg.silu_backward, ValueError, None, re.escape("gradInput dtype must be one of"), f, f,
           out=np.zeros(4, np.int16))


def test_error_shapes_and_ranks():
    f24, f25 = np.zeros((2, 4), F32), np.zeros((2, 5), F32)
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("aclnnSiluBackward: gradInput shape [2,5] != self shape [2,4]"), f24, f24, out=f25)
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("aclnnSiluBackward: gradOutput shape [3] and self shape [2,4] do not broadcast"),
           np.zeros(3, F32), f24)
    raises(tg.silu_backward, ValueError, 161002,
           re.escape("gradInput shape [2,5] != broadcast of gradOutput [1,4] and self [2,4] = [2,4]"),
           np.zeros((1, 4), F32), f24, out=f25)
    r9 = np.zeros((1,) * 8 + (2,), F32)
    raises(tg.silu_backward, ValueError, 161002, re.escape("gradOutput rank must be at most 8, got 9"), r9, r9)
    raises(tg.silu_backward, ValueError, None, re.escape("rank must be at most 8, got 9"), np.zeros(2, F32),
           np.zeros(2, F32), out=r9)


def test_error_outputs():
    f = np.zeros((3, 4), F32)
    ro = np.zeros((3, 4), F32)
    ro.flags.writeable = False
    raises(tg.silu_backward, ValueError, 161002, re.escape("out is not writeable"), f, f, out=ro)
    raises(tg.silu_backward, ValueError, 161002, re.escape("gradInput has overlapping elements"), f, f,
           out=np.lib.stride_tricks.as_strided(np.zeros(4, F32), (3, 4), (0, 4)))
    buf = np.zeros(20, F32)
    x = buf[:12].reshape(3, 4)
    raises(tg.silu_backward, ValueError, 161002, re.escape("gradInput overlaps self without being the same view"), f,
           x, out=buf[1:13].reshape(3, 4))
    raises(tg.silu_backward, ValueError, None, re.escape("gradInput overlaps gradOutput without being the same view"),
           x, f, out=x[::-1])
    odd = np.lib.stride_tricks.as_strided(np.zeros(40, np.uint8).view(F32), (3,), (6,))
    raises(tg.silu_backward, ValueError, None, re.escape("stride 6 bytes is not a multiple of its itemsize 4"), odd,
           np.zeros(3, F32))


def test_error_byte_order_and_alignment(isa):
    f = np.arange(6, dtype=F32)
    raises(tg.silu_backward, ValueError, 161002, re.escape("grad_output dtype >f4 is not in native byte order"),
           f.astype(">f4"), f)
    raises(tg.silu_backward, ValueError, None, re.escape("input dtype >f2 is not in native byte order"), f.astype(F16),
           f.astype(">f2"))
    raises(tg.silu_backward, ValueError, None, re.escape("out dtype >f4 is not in native byte order"), f, f,
           out=np.zeros(6, ">f4"))
    # data not aligned to the element size is read and written correctly
    raw = np.zeros(4 * 1001 + 1, np.uint8)
    x = raw[1:4001].view(F32)
    x[:] = np.linspace(-9, 9, 1000, dtype=F32)
    out = np.zeros(4 * 1001 + 3, np.uint8)[3:4003].view(F32)
    dy = np.full(1000, 0.5, F32)
    tg.silu_backward(dy, x, out=out)
    np.testing.assert_array_equal(out, tg.silu_backward(dy, x.copy()))


def test_error_types():
    f = np.zeros(3, F32)
    with pytest.raises(TypeError, match="grad_output must be a numpy.ndarray, got list"):
        tg.silu_backward([1.0, 2.0, 3.0], f)
    with pytest.raises(TypeError, match="input must be a numpy.ndarray, got str"):
        tg.silu_backward(f, "1.0")
    with pytest.raises(TypeError, match="out must be a numpy.ndarray, got list"):
        tg.silu_backward(f, f, out=[0.0] * 3)
    with pytest.raises(TypeError):
        tg.silu_backward(f, f, np.zeros(3, F32))  # out is keyword-only


def test_failed_call_leaves_output_untouched():
    out = np.full((2, 5), 3.0, F32)
    with pytest.raises(ValueError):
        tg.silu_backward(np.zeros((2, 4), F32), np.zeros((2, 4), F32), out=out)
    assert (out == 3).all()


# ---- torch cross-check ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_matches_torch(isa, rng, dtype):
    torch = pytest.importorskip("torch")
    tdt = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}[dtype]
    dy32, x32 = sample_dy(rng, (4099,)), sample_x(rng, (4099,))
    x32[:6] = [1e4, -1e4, np.inf, -np.inf, np.nan, -100]
    dy, x = dy32.astype(dtype), x32.astype(dtype)
    ours = tg.silu_backward(dy, x).astype(np.float64)
    theirs = torch.ops.aten.silu_backward(torch.from_numpy(dy.astype(F32)).to(tdt),
                                          torch.from_numpy(x.astype(F32)).to(tdt)).float().numpy().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    ok = ~np.isnan(ours)
    # Both compute in fp32 and round once to the dtype: a couple of dtype ulps apart at most.
    # PyTorch's vectorised sigmoid flushes subnormal sigmoid values (x < -87) to zero; allow that.
    _, scale = silu_backward_ref(dy[ok], x[ok])
    flush = np.abs(dy[ok].astype(np.float64)) * (1 + np.abs(x[ok].astype(np.float64))) * 2.0**-126
    tol = 2 * ulp(scale, dtype) + 12 * ulp(scale, F32) + flush
    assert (np.abs(ours[ok] - theirs[ok]) <= tol).all()
