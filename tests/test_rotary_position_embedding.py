"""tilegrad.rotary_position_embedding and rotary_position_embedding_grad through Python: accuracy against
the float64 references written from the vendor's documents (reference/rotary_position_embedding.py)
over every dtype, mode, cos/sin broadcast, head dim and stride pattern at every ISA level; in place;
empty tensors; 1 vs 2 vs 3 threads bit-identical (dcos / dsin included); the same bits at every ISA;
a cross-check with PyTorch's Hugging Face rotate_half composite (and GPT-J's interleaved one) and
its autograd; errors (exception class, message, .code); a hypothesis property."""

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegrad as tg
from reference.rotary_position_embedding import (BF16, F16, F32, assert_rope_close, broadcast_axes, rope_forward_f64,
                                                 rope_grad_f64)
from helpers import raises

DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]
MODES = [0, 1, 2, 3]
SHAPE = (2, 3, 5)
# Every cos / sin broadcast over x's three leading dims (1 = broadcast), named in the doc's letters.
PATTERNS = list(itertools.product(*[(1, n) for n in SHAPE]))
TILING_ERR, PARAM_INVALID, PARAM_NULLPTR = 561002, 161002, 161001


def data(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def case(rng, dtype, lead=SHAPE, cos_lead=SHAPE, d=8):
    x = data(rng, lead + (d,), dtype, 2.0)
    cos = data(rng, tuple(cos_lead) + (d,), dtype)
    sin = data(rng, tuple(cos_lead) + (d,), dtype)
    return x, cos, sin


def check_forward(y, x, cos, sin, mode):
    ref, scale = rope_forward_f64(x, cos, sin, mode)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert_rope_close(y, ref, scale, 2, f"y mode {mode}")


def check_grad(result, dy, cos, sin, x, mode):
    dx, dcos, dsin = result
    (rdx, sdx), sums = rope_grad_f64(dy, cos, sin, x, mode)
    assert dx.dtype == dy.dtype and dx.shape == dy.shape
    assert_rope_close(dx, rdx, sdx, 2, f"dx mode {mode}")
    if x is None:
        assert dcos is None and dsin is None
        return
    rc, rs, scale = sums
    n = 2 * int(np.prod([dy.shape[k] for k in broadcast_axes(dy.shape, cos.shape)]))
    assert dcos.shape == cos.shape and dsin.shape == cos.shape and dcos.dtype == dy.dtype
    assert_rope_close(dcos, rc, scale, n, f"dcos mode {mode}")
    assert_rope_close(dsin, rs, scale, n, f"dsin mode {mode}")


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


# ---- forward ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
def test_forward_every_broadcast(isa, rng, dtype, mode):
    for pattern in PATTERNS:
        x, cos, sin = case(rng, dtype, cos_lead=pattern, d=40)
        y = tg.rotary_position_embedding(x, cos, sin, mode)
        assert y.flags.c_contiguous
        check_forward(y, x, cos, sin, mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_forward_head_dims(isa, rng, dtype):
    """Vector bodies, tails and both at each ISA: pairs of 1..512 (D up to the 1024 limit)."""
    for d in (2, 4, 6, 8, 12, 16, 20, 28, 32, 36, 48, 64, 72, 96, 100, 128, 160, 256, 1020, 1024):
        for mode in MODES:
            if mode == 2 and d % 4:
                continue
            x, cos, sin = case(rng, dtype, lead=(1, 3, 2), cos_lead=(1, 3, 1), d=d)
            check_forward(tg.rotary_position_embedding(x, cos, sin, mode), x, cos, sin, mode)


def test_forward_small_integers_exact():
    """Small integers: every product and sum exact, so y equals the formula evaluated in float32."""
    x = np.arange(128, dtype=F32).reshape(1, 1, 1, 128) % 97 + 3
    cos = (np.arange(128, dtype=F32) * 7 % 31).reshape(1, 1, 1, 128)
    sin = (np.arange(128, dtype=F32) * 5 % 29).reshape(1, 1, 1, 128)
    y = tg.rotary_position_embedding(x, cos, sin, 1)
    want = x * cos + np.stack((-x[..., 1::2], x[..., ::2]), -1).reshape(x.shape) * sin
    np.testing.assert_array_equal(y, want)  # small integers: exact


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
def test_forward_strided(isa, rng, dtype, mode):
    d = 16
    # x viewed (B, N, S, D) over (B, S, N, D) memory (Hugging Face's transpose), reversed heads
    xb = data(rng, (2, 5, 3, d), dtype)
    x = xb.transpose(0, 2, 1, 3)[:, ::-1]
    # cos a zero-stride broadcast view over the batch and head dims
    cos = np.broadcast_to(data(rng, (1, 1, 5, d), dtype), (2, 3, 5, d))
    sin = np.broadcast_to(data(rng, (1, 1, 5, 2 * d), dtype)[..., ::2], cos.shape)  # strided last dim: staged
    outbuf = np.zeros((2, 3, 5, 2 * d), dtype)
    out = outbuf[..., ::-2]
    y = tg.rotary_position_embedding(x, cos, sin, mode, out=out)
    assert y is out
    check_forward(out, x, cos, sin, mode)
    assert (outbuf[..., ::2] == 0).all()
    np.testing.assert_array_equal(
        out, tg.rotary_position_embedding(np.ascontiguousarray(x), np.ascontiguousarray(cos[:1, :1]),
                                          np.ascontiguousarray(sin[:1, :1]), mode))


@pytest.mark.parametrize("mode", MODES)
def test_forward_in_place(isa, rng, mode):
    for dtype in DTYPES:
        x, cos, sin = case(rng, dtype, cos_lead=(1, 1, 5), d=36)
        want = tg.rotary_position_embedding(x, cos, sin, mode)
        y = x.copy()
        assert tg.rotary_position_embedding(y, cos, sin, mode, out=y) is y
        assert same_bits(y, want)


def test_forward_empty(rng):
    x = np.zeros((2, 0, 3, 8), F32)
    assert tg.rotary_position_embedding(x, np.zeros((1, 1, 1, 8), F32), np.zeros((1, 1, 1, 8), F32)).shape == x.shape
    # the vendor's document: an empty x is not bound by the cos / sin shape rules
    y = tg.rotary_position_embedding(np.zeros((0, 2, 2, 7), F32), np.zeros((3, 3, 3, 5), F32), np.zeros((3, 3, 3, 5), F32))
    assert y.shape == (0, 2, 2, 7)


def test_forward_special_values():
    """inf, NaN, -0 and huge values propagate as the formula evaluated in float32 does (inf * 0 = NaN,
    overflow to inf)."""
    vals = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -2.0, 1.0], F32)
    x = vals.reshape(1, 1, 1, 8)
    cos = np.array([1.0, 0.0, 2.0, -1.0, 1.0, 2.0, 0.0, np.inf], F32).reshape(1, 1, 1, 8)
    sin = np.array([0.0, 1.0, 0.5, 3e38, -1.0, 0.0, 1.0, 2.0], F32).reshape(1, 1, 1, 8)
    with np.errstate(all="ignore"):
        x1, x2 = x[..., :4], x[..., 4:]
        want = x * cos + np.concatenate((-x2, x1), -1) * sin
    np.testing.assert_array_equal(tg.rotary_position_embedding(x, cos, sin, 0), want)


# ---- gradient --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
def test_grad_every_broadcast(isa, rng, dtype, mode):
    for pattern in PATTERNS:
        x, cos, sin = case(rng, dtype, cos_lead=pattern, d=40)
        dy = data(rng, x.shape, dtype)
        check_grad(tg.rotary_position_embedding_grad(dy, cos, sin, x, mode), dy, cos, sin, x, mode)
        dx_only = tg.rotary_position_embedding_grad(dy, cos, sin, None, mode)
        check_grad(dx_only, dy, cos, sin, None, mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_grad_head_dims_and_long_sums(isa, rng, dtype):
    for d in (2, 4, 12, 36, 64, 128, 1024):
        for mode in MODES:
            if mode == 2 and d % 4:
                continue
            # (1,1,1,D) over 4*40*3 rows: several blocks per group, a second pass
            x, cos, sin = case(rng, dtype, lead=(4, 40, 3), cos_lead=(1, 1, 1), d=d)
            dy = data(rng, x.shape, dtype)
            check_grad(tg.rotary_position_embedding_grad(dy, cos, sin, x, mode), dy, cos, sin, x, mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
def test_grad_strided_and_out(isa, rng, dtype, mode):
    d = 16
    xb, dyb = data(rng, (2, 5, 3, d), dtype), data(rng, (2, 5, 3, 2 * d), dtype)
    x = xb.transpose(0, 2, 1, 3)
    dy = dyb.transpose(0, 2, 1, 3)[..., 1::2]  # strided last dim: the staged path
    cos = np.broadcast_to(data(rng, (1, 1, 5, d), dtype), (1, 3, 5, d))
    sin = data(rng, (1, 3, 5, d), dtype)[:, ::-1]
    dx = np.zeros((2, 3, 5, d), dtype)[:, ::-1]
    dcosbuf = np.full((1, 3, 5, 2 * d), 7, dtype)
    dcos, dsin = dcosbuf[..., ::2], np.zeros((1, 3, 5, d), dtype).transpose(0, 1, 2, 3)[:, ::-1]
    res = tg.rotary_position_embedding_grad(dy, cos, sin, x, mode, out=(dx, dcos, dsin))
    assert res[0] is dx and res[1] is dcos and res[2] is dsin
    check_grad(res, dy, cos, sin, x, mode)
    assert (dcosbuf[..., 1::2] == 7).all()
    plain = tg.rotary_position_embedding_grad(*(np.ascontiguousarray(a) for a in (dy, cos, sin, x)), mode)
    for a, b in zip(res, plain):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("mode", MODES)
def test_grad_in_place(isa, rng, mode):
    for dtype in DTYPES:
        x, cos, sin = case(rng, dtype, cos_lead=(2, 1, 5), d=36)
        dy = data(rng, x.shape, dtype)
        want = tg.rotary_position_embedding_grad(dy, cos, sin, x, mode)
        g = dy.copy()
        res = tg.rotary_position_embedding_grad(g, cos, sin, x, mode, out=(g, None, None))
        assert res[0] is g and all(same_bits(a, b) for a, b in zip(res, want))
        g = dy.copy()
        assert same_bits(tg.rotary_position_embedding_grad(g, cos, sin, None, mode, out=(g, None, None))[0], want[0])


def test_grad_without_x_leaves_given_sums_untouched(rng):
    x, cos, sin = case(rng, F32, cos_lead=(1, 3, 1))
    dcos, dsin = np.full(cos.shape, 5, F32), np.full(cos.shape, 6, F32)
    dx, c, s = tg.rotary_position_embedding_grad(data(rng, x.shape, F32), cos, sin, None, 0, out=(None, dcos, dsin))
    assert c is dcos and s is dsin and (dcos == 5).all() and (dsin == 6).all()


def test_grad_empty(rng):
    cos = data(rng, (1, 4, 1, 8), F32)
    dx, dcos, dsin = tg.rotary_position_embedding_grad(np.zeros((0, 4, 3, 8), F32), cos, cos.copy(),
                                                       np.zeros((0, 4, 3, 8), F32), 0,
                                                       out=(None, np.full(cos.shape, 9, F32), np.full(cos.shape, 9, F32)))
    assert dx.shape == (0, 4, 3, 8)
    assert (dcos == 0).all() and (dsin == 0).all()  # sums over no rows


# ---- determinism -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_threads_bit_identical(threads, rng, dtype):
    for lead, cos_lead in [((4, 64, 8), (1, 1, 1)), ((3, 16, 32), (3, 1, 32)), ((2, 128, 4), (1, 128, 1)),
                           ((5, 7, 9), (5, 7, 9))]:
        x, cos, sin = case(rng, dtype, lead=lead, cos_lead=cos_lead, d=64)
        dy = data(rng, x.shape, dtype)
        results = []
        for n in (1, 2, 3):
            threads(n)
            results.append((tg.rotary_position_embedding(x, cos, sin, 0),)
                           + tg.rotary_position_embedding_grad(dy, cos, sin, x, 0)
                           + tg.rotary_position_embedding_grad(dy, cos, sin, x, 1))
        for r in results[1:]:
            assert all(same_bits(a, b) for a, b in zip(r, results[0]))


def test_isas_bit_identical(rng, available_isas):
    """Products rounded before every sum (never fused) and a baseline-compiled final pass: the same
    bits at every ISA level (README, "Algorithm and precision")."""
    previous = tg.max_isa()
    try:
        for mode in MODES:
            x, cos, sin = case(rng, BF16, lead=(3, 40, 4), cos_lead=(1, 1, 4), d=100)
            dy = data(rng, x.shape, BF16)
            runs = []
            for isa in available_isas:
                tg.set_max_isa(isa)
                runs.append((tg.rotary_position_embedding(x, cos, sin, mode),)
                            + tg.rotary_position_embedding_grad(dy, cos, sin, x, mode))
            for r in runs[1:]:
                assert all(same_bits(a, b) for a, b in zip(r, runs[0]))
    finally:
        tg.set_max_isa(previous)


# ---- PyTorch ---------------------------------------------------------------------------------

def test_matches_hugging_face_composite_and_autograd(rng):
    torch = pytest.importorskip("torch")

    def rotate_half(x):  # transformers.models.llama.modeling_llama.rotate_half
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def rotate_every_two(x):  # GPT-J's interleaved rotation
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)

    for mode, rot in ((0, rotate_half), (1, rotate_every_two)):
        for dtype in (torch.float32, torch.bfloat16):
            q = torch.randn(2, 4, 16, 64, dtype=dtype, requires_grad=True)
            cos = torch.randn(2, 1, 16, 64, dtype=dtype, requires_grad=True)
            sin = torch.randn(2, 1, 16, 64, dtype=dtype, requires_grad=True)
            y = q * cos + rot(q) * sin
            g = torch.randn_like(y)
            y.backward(g)
            npy = lambda t: t.detach().float().numpy().astype(F32 if dtype == torch.float32 else BF16)
            yt = tg.rotary_position_embedding(npy(q), npy(cos), npy(sin), mode)
            dx, dcos, dsin = tg.rotary_position_embedding_grad(npy(g), npy(cos), npy(sin), npy(q), mode)
            if dtype == torch.float32:
                # products rounded, then summed: PyTorch's composite bit for bit (y and dx)
                np.testing.assert_array_equal(yt, npy(y))
                np.testing.assert_array_equal(dx, npy(q.grad))
                np.testing.assert_allclose(dcos, npy(cos.grad), rtol=1e-6, atol=1e-5)
                np.testing.assert_allclose(dsin, npy(sin.grad), rtol=1e-6, atol=1e-5)
            else:
                # bf16: PyTorch rounds every intermediate to bf16, tilegrad once: within 2 bf16 ulps
                for a, b in ((yt, y), (dx, q.grad), (dcos, cos.grad), (dsin, sin.grad)):
                    np.testing.assert_allclose(a.astype(F32), npy(b).astype(F32), rtol=2 ** -6, atol=2 ** -5 * 8)


# ---- errors ----------------------------------------------------------------------------------

def test_errors_forward(rng):
    op = "aclnnRotaryPositionEmbedding"
    x, cos, sin = case(rng, F32, cos_lead=(1, 3, 1))
    f = tg.rotary_position_embedding
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: cos dtype float16 != x dtype float32"), x, cos.astype(F16),
           sin)
    raises(f, ValueError, PARAM_INVALID,
           re.escape(f"{op}: x dtype must be one of {{float32, float16, bfloat16}}, got float64"),
           x.astype(np.float64), cos, sin)
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: out dtype bfloat16 != x dtype float32"), x, cos, sin,
           out=np.zeros(x.shape, BF16))
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: x must be 4-D, got shape [3,5,8]"), x[0], cos, sin)
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: cos must be 4-D, got shape [3,1,8]"), x, cos[0], sin)
    raises(f, ValueError, TILING_ERR,
           re.escape(f"{op}: mode must be 0 (half), 1 (interleave), 2 (quarter) or 3 (interleave-half), got 4"), x,
           cos, sin, 4)
    raises(f, ValueError, TILING_ERR, re.escape("got -1"), x, cos, sin, -1)
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: sin shape [1,3,1,4] != cos shape [1,3,1,8]"), x, cos,
           sin[..., :4])
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: cos last dim must equal x's 8, got 4 (cos shape [1,3,1,4])"),
           x, cos[..., :4], sin[..., :4])
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: x last dim must be a multiple of 2 in mode 0 (half), got 7"),
           x[..., :7], cos[..., :7], sin[..., :7])
    raises(f, ValueError, TILING_ERR,
           re.escape(f"{op}: x last dim must be a multiple of 4 in mode 2 (quarter), got 6"), x[..., :6], cos[..., :6],
           sin[..., :6], 2)
    big = np.zeros((1, 1, 1, 1026), F32)
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: x last dim must be at most 1024, got 1026"), big, big, big)
    raises(f, ValueError, TILING_ERR,
           re.escape(f"{op}: cos dim 1 must be 1 or x's 3 (cos shape [1,2,1,8], x shape [2,3,5,8]), got 2"), x,
           cos[:, :2], sin[:, :2])
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: out shape [2,3,4,8] != x shape [2,3,5,8]"), x, cos, sin,
           out=np.zeros((2, 3, 4, 8), F32))
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: out overlaps x without being the same view"), x, cos, sin,
           out=x[:, :, ::-1])
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: out overlaps cos"), cos, cos, sin, out=cos)
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: out has overlapping elements"), x, cos, sin,
           out=np.lib.stride_tricks.as_strided(np.zeros((1, 3, 5, 8), F32), x.shape, (0, 160, 32, 4)))
    raises(f, TypeError, None, None, x.tolist(), cos, sin)  # any message
    raises(f, TypeError, PARAM_INVALID, re.escape(f"{op}: mode must be an int, got 0.0 (float)"), x, cos, sin, 0.0)


def test_errors_grad(rng):
    op = "aclnnRotaryPositionEmbeddingGrad"
    x, cos, sin = case(rng, F32, cos_lead=(1, 3, 1))
    dy = data(rng, x.shape, F32)
    f = tg.rotary_position_embedding_grad
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: xOptional dtype float16 != dy dtype float32"), dy, cos, sin,
           x.astype(F16))
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: dcosOut dtype bfloat16 != dy dtype float32"), dy, cos, sin,
           x,
           out=(None, np.zeros(cos.shape, BF16), None))
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: xOptional shape [2,3,5,4] != dy shape [2,3,5,8]"), dy, cos, sin,
           x[..., :4])
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: dxOut shape [2,3,5,4] != dy shape [2,3,5,8]"), dy, cos, sin, x,
           out=(np.zeros((2, 3, 5, 4), F32), None, None))
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: dsinOut shape [1,1,1,8] != cos shape [1,3,1,8]"), dy, cos, sin,
           x,
           out=(None, None, np.zeros((1, 1, 1, 8), F32)))
    raises(f, ValueError, TILING_ERR, re.escape(f"{op}: cos dim 0 must be 1 or dy's 2"), dy,
           np.zeros((3, 3, 1, 8), F32),
           np.zeros((3, 3, 1, 8), F32))
    raises(f, ValueError, TILING_ERR, re.escape("mode must be 0 (half)"), dy, cos, sin, x, 9)
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: dcosOut overlaps dsinOut"), dy, cos, sin, x,
           out=(None, (buf := np.zeros(cos.shape, F32)), buf))
    raises(f, ValueError, PARAM_INVALID, re.escape(f"{op}: dxOut overlaps xOptional"), dy, cos, sin, x,
           out=(x, None, None))
    raises(f, TypeError, PARAM_INVALID, re.escape("out must be a tuple (dx, dcos, dsin)"), dy, cos, sin, x, out=dy)


# ---- property --------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(lead=st.tuples(*[st.integers(1, 4)] * 3), mask=st.tuples(*[st.booleans()] * 3), pairs=st.integers(1, 40),
       mode=st.sampled_from(MODES), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2 ** 31))
def test_property_matches_reference(lead, mask, pairs, mode, dtype, seed):
    rng = np.random.default_rng(seed)
    d = 4 * pairs if mode == 2 else 2 * pairs
    cos_lead = tuple(n if keep else 1 for n, keep in zip(lead, mask))
    x, cos, sin = case(rng, dtype, lead=lead, cos_lead=cos_lead, d=d)
    check_forward(tg.rotary_position_embedding(x, cos, sin, mode), x, cos, sin, mode)
    dy = data(rng, x.shape, dtype)
    check_grad(tg.rotary_position_embedding_grad(dy, cos, sin, x, mode), dy, cos, sin, x, mode)
