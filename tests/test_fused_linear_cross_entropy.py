"""Vocabulary-parallel fused linear cross entropy (SEMANTICS section 5): aclnnFusedLinearOnlineMaxSum,
aclnnFusedCrossEntropyLossWithMaxSum, aclnnFusedLinearCrossEntropyLossGrad and the single-process
tg.fused_linear_cross_entropy, against a float64 NumPy reference written from the spec."""

import ctypes

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from tilegrad import _core
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, last_error, launch, run_op)

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]
# max |error| / max |exact| allowed for the gradients (G is rounded once to the input dtype).
GRAD_TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}
OMS, LWMS, GRAD = "aclnnFusedLinearOnlineMaxSum", "aclnnFusedCrossEntropyLossWithMaxSum", \
    "aclnnFusedLinearCrossEntropyLossGrad"


# ---------------------------------------------------------------- float64 reference (from SEMANTICS)

def f64(a):
    return np.asarray(a).astype(np.float64)


def ref_forward(x, w, target, start, end):
    logits = f64(x) @ f64(w).T
    bt, v = logits.shape
    mx = logits.max(axis=1) if v else np.full(bt, -np.inf)
    sum_exp = np.exp(logits - mx[:, None]).sum(axis=1) if v else np.zeros(bt)
    t = np.asarray(target).astype(np.int64)
    mask = (t < start) | (t >= end)
    masked = np.where(mask, 0, t - start)
    pred = np.zeros(bt)
    rows = np.nonzero(~mask)[0]
    pred[rows] = logits[rows, masked[rows]] - mx[rows]
    return mx, sum_exp, pred, mask, masked, logits


def pack_lsb_first(bits):
    bits = np.asarray(bits, dtype=bool)
    out = np.zeros((len(bits) + 7) // 8, np.uint8)
    for i, b in enumerate(bits):
        if b:
            out[i // 8] |= 1 << (i % 8)
    return out


def round_to(a, dtype):
    return np.asarray(a, np.float64).astype(np.float32).astype(dtype).astype(np.float64)


def ref_grad(grad, x, w, mask_bits, masked, gmax, gsum, softmax, dtype):
    """G = softmax or exp(L - max)/sum; G[i, t_i] -= 1 where the bit is 0; G *= grad; rounded to dtype."""
    if softmax is None:
        g = np.exp(f64(x) @ f64(w).T - f64(gmax)[:, None]) / f64(gsum)[:, None]
    else:
        g = f64(softmax).copy()
    rows = np.nonzero(~np.asarray(mask_bits, bool))[0]
    g[rows, np.asarray(masked)[rows]] -= 1.0
    g *= f64(grad)[:, None]
    g = round_to(g, dtype)
    return g @ f64(w), g.T @ f64(x)


def full_ce_reference(x, w, target, grad):
    """Loss per row and the gradients of sum_i grad_i * CE_i (autograd of cross_entropy(x @ w.T))."""
    logits = f64(x) @ f64(w).T
    m = logits.max(axis=1, keepdims=True)
    p = np.exp(logits - m)
    s = p.sum(axis=1, keepdims=True)
    p /= s
    bt = len(target)
    loss = (np.log(s[:, 0]) + m[:, 0]) - logits[np.arange(bt), target]
    d = p.copy()
    d[np.arange(bt), target] -= 1.0
    d *= f64(grad)[:, None]
    return loss, d @ f64(w), d.T @ f64(x)


def rel_err(a, b):
    a, b = f64(a), f64(b)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def make_inputs(bt, h, v, dtype, seed=0, tdtype=np.int64):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((bt, h)) * 0.7).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((v, h)) * 0.5).astype(np.float32).astype(dtype)
    t = rng.integers(0, max(v, 1), bt).astype(tdtype)
    return x, w, t


# ---------------------------------------------------------------- the three ops, sharded

def run_sharded(x, w, target, grad, shards, mode):
    """Vocabulary split over `shards` ranks, statistics all-reduced in NumPy (as torch.distributed would)."""
    v = w.shape[0]
    bounds = np.linspace(0, v, shards + 1).astype(int)
    parts = []
    for r in range(shards):
        s, e = bounds[r], bounds[r + 1]
        parts.append(tg.fused_linear_online_max_sum(x, w[s:e], target, s, e, return_logits=(mode == "hp")))
    maxes = np.stack([p[0] for p in parts])
    gmax = maxes.max(axis=0)
    gsum = np.sum([p[1] * np.exp(p[0] - gmax) for p in parts], axis=0, dtype=np.float32)
    gpred = np.sum([np.where(np.unpackbits(p[3], bitorder="little")[:len(target)].astype(bool), 0.0,
                             p[2] + p[0] - gmax) for p in parts], axis=0).astype(np.float32)
    gi_total = np.zeros(x.shape, np.float64)
    gw_parts = []
    losses = []
    for r, p in enumerate(parts):
        s, e = bounds[r], bounds[r + 1]
        loss, softmax = tg.fused_cross_entropy_loss_with_max_sum(gmax, gsum, gpred, 0.0, p[5])
        losses.append(loss)
        if mode == "hp":
            gi, gw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w[s:e], p[3], p[4], softmax=softmax)
        else:
            gi, gw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w[s:e], p[3], p[4], logits_max=gmax,
                                                             sum_exp_logits=gsum)
        gi_total += f64(gi)
        gw_parts.append(gw)
    for loss in losses[1:]:
        np.testing.assert_array_equal(loss, losses[0])
    return losses[0], gi_total, np.concatenate(gw_parts, axis=0)


SHAPES = [(1, 1, 1), (3, 5, 7), (17, 8, 130), (64, 40, 1000)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("shards", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["mem", "hp"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_sharded_matches_full_cross_entropy(shape, shards, mode, dtype):
    bt, h, v = shape
    x, w, t = make_inputs(bt, h, v, dtype, seed=bt + v + shards)
    rng = np.random.default_rng(1)
    grad = rng.uniform(0.5, 1.5, bt).astype(np.float32)
    grad[::5] = 0.0  # ignored rows (ignore_index handled by the caller with a zero upstream gradient)
    loss, gi, gw = run_sharded(x, w, t, grad, shards, mode)
    ref_loss, ref_gi, ref_gw = full_ce_reference(x, w, t, grad)
    np.testing.assert_allclose(loss, ref_loss, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(ref_loss).max()))
    tol = GRAD_TOL[dtype] * (1 + shards * (dtype != np.float32))
    assert rel_err(gi, ref_gi) < tol
    assert rel_err(gw, ref_gw) < tol


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_all_isas_agree_with_reference(isa, dtype):
    x, w, t = make_inputs(37, 24, 300, dtype, seed=3)
    grad = np.linspace(0.1, 1.0, 37).astype(np.float32)
    for mode in ("mem", "hp"):
        loss, gi, gw = run_sharded(x, w, t, grad, 2, mode)
        ref_loss, ref_gi, ref_gw = full_ce_reference(x, w, t, grad)
        np.testing.assert_allclose(loss, ref_loss, rtol=3e-5, atol=3e-5)
        assert rel_err(gi, ref_gi) < 2 * GRAD_TOL[dtype]
        assert rel_err(gw, ref_gw) < 2 * GRAD_TOL[dtype]


# ---------------------------------------------------------------- forward ops in detail

@pytest.mark.parametrize("tdtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_online_max_sum_outputs(dtype, tdtype, isa):
    x, w, _ = make_inputs(21, 16, 50, dtype, seed=5)
    start, end = 100, 150
    t = np.array([99, 100, 149, 150, 0, 120, 5000, 101] * 2 + [130, 140, 100, 149, 99], tdtype)
    mx, s, p, mask, masked, logits = tg.fused_linear_online_max_sum(x, w, t, start, end, return_logits=True)
    rmx, rs, rp, rmask, rmasked, rl = ref_forward(x, w, t, start, end)
    assert mx.dtype == s.dtype == p.dtype == np.float32 and mask.dtype == np.uint8 and masked.dtype == tdtype
    np.testing.assert_allclose(mx, rmx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, rs, rtol=1e-5)
    np.testing.assert_allclose(p, rp, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mask, pack_lsb_first(rmask))  # LSB first, padding bits 0
    np.testing.assert_array_equal(masked, rmasked)
    assert logits.dtype == dtype
    ulp = {np.dtype(np.float32): 2e-6, np.dtype(np.float16): 1e-3, BF16: 8e-3}[dtype]  # one rounding (+fp32 sum)
    np.testing.assert_allclose(f64(logits), rl, rtol=ulp, atol=1e-5)
    m2 = tg.fused_linear_online_max_sum(x, w, t, start, end)
    assert m2[5] is None
    np.testing.assert_array_equal(m2[0], mx)


def test_mask_bit_layout_lsb_first():
    x, w, _ = make_inputs(11, 4, 10, np.float32)
    t = np.full(11, 100, np.int64)  # every target outside [0, 10)
    t[0] = 3
    t[9] = 4
    mask = tg.fused_linear_online_max_sum(x, w, t, 0, 10)[3]
    # rows 1..7 masked -> byte 0 = 0b11111110; rows 8, 10 masked, row 9 not, bits 11..15 padding = 0
    np.testing.assert_array_equal(mask, np.array([0b11111110, 0b00000101], np.uint8))


def test_loss_with_max_sum_softmax(isa):
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((9, 33)).astype(np.float32)
    mx = logits.max(axis=1)
    s = np.exp(f64(logits) - f64(mx)[:, None]).sum(axis=1).astype(np.float32)
    pred = (logits[:, 4] - mx).astype(np.float32)
    for dt in DTYPES:
        lg = logits.astype(dt)
        loss, sm = tg.fused_cross_entropy_loss_with_max_sum(mx, s, pred, 0.0, lg)
        np.testing.assert_allclose(loss, np.log(f64(s)) - f64(pred), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(sm, np.exp(f64(lg) - f64(mx)[:, None]) / f64(s)[:, None], rtol=1e-5, atol=1e-7)
    loss2, none = tg.fused_cross_entropy_loss_with_max_sum(mx, s, pred)
    assert none is None
    np.testing.assert_array_equal(loss2, loss)
    # strided logits (a column slice)
    wide = np.zeros((9, 66), np.float32)
    wide[:, ::2] = logits
    _, sm_strided = tg.fused_cross_entropy_loss_with_max_sum(mx, s, pred, 0.0, wide[:, ::2])
    _, sm_plain = tg.fused_cross_entropy_loss_with_max_sum(mx, s, pred, 0.0, logits)
    np.testing.assert_array_equal(sm_strided, sm_plain)


# ---------------------------------------------------------------- gradient op in detail

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_grad_matches_spec_reference(dtype, isa):
    bt, h, v = 29, 12, 77
    x, w, _ = make_inputs(bt, h, v, dtype, seed=8)
    rng = np.random.default_rng(9)
    bits = rng.random(bt) < 0.3
    masked = np.where(bits, 0, rng.integers(0, v, bt)).astype(np.int32)
    grad = rng.standard_normal(bt).astype(np.float32)
    logits = f64(x) @ f64(w).T
    gmax = (logits.max(axis=1) + rng.uniform(0, 1, bt)).astype(np.float32)  # any global statistics
    gsum = (np.exp(logits - f64(gmax)[:, None]).sum(axis=1) * rng.uniform(1, 3, bt)).astype(np.float32)
    softmax = rng.random((bt, v)).astype(np.float32)
    for sm in (None, softmax):
        gi, gw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, pack_lsb_first(bits), masked,
                                                         logits_max=gmax, sum_exp_logits=gsum, softmax=sm)
        rgi, rgw = ref_grad(grad, x, w, bits, masked, gmax, gsum, sm, dtype)
        assert gi.dtype == gw.dtype == dtype and gi.shape == (bt, h) and gw.shape == (v, h)
        assert rel_err(gi, rgi) < GRAD_TOL[dtype]
        assert rel_err(gw, rgw) < GRAD_TOL[dtype]


def test_grad_minus_one_before_rounding():
    # softmax ~ 1 at the target: (p - 1) must be formed in fp32, not from a rounded p.
    bt, h, v = 4, 3, 2
    x = np.ones((bt, h), BF16)
    w = np.ones((v, h), BF16)
    softmax = np.array([[1 - 2.0 ** -20, 2.0 ** -20]] * bt, np.float32)
    gi, gw = tg.fused_linear_cross_entropy_loss_grad(np.ones(bt, np.float32), x, w, np.zeros(1, np.uint8),
                                                     np.zeros(bt, np.int64), softmax=softmax)
    # G row = [-2^-20, 2^-20] exactly representable in bf16 -> grad_input = 0, grad_weight = +-bt*2^-20
    np.testing.assert_array_equal(f64(gi), 0.0)
    np.testing.assert_array_equal(f64(gw[0]), -bt * 2.0 ** -20)
    np.testing.assert_array_equal(f64(gw[1]), bt * 2.0 ** -20)


def test_bool_mask_equals_packed_mask_and_extra_bytes():
    bt, h, v = 13, 6, 20
    x, w, t = make_inputs(bt, h, v, np.float32, seed=4)
    bits = np.arange(bt) % 3 == 0
    grad = np.ones(bt, np.float32)
    sm = np.random.default_rng(0).random((bt, v)).astype(np.float32)
    a = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, bits, t, softmax=sm)
    packed = np.concatenate([pack_lsb_first(bits), np.array([0xFF, 0xFF], np.uint8)])  # longer is fine
    b = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, packed, t, softmax=sm)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p, q)


def test_softmax_not_modified_and_repeatable():
    bt, h, v = 10, 8, 16
    x, w, t = make_inputs(bt, h, v, BF16, seed=6)
    sm = np.random.default_rng(1).random((bt, v)).astype(np.float32)
    before = sm.copy()
    mask = np.zeros(2, np.uint8)
    first = tg.fused_linear_cross_entropy_loss_grad(np.ones(bt, np.float32), x, w, mask, t, softmax=sm)
    np.testing.assert_array_equal(sm, before)
    second = tg.fused_linear_cross_entropy_loss_grad(np.ones(bt, np.float32), x, w, mask, t, softmax=sm)
    for p, q in zip(first, second):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("shape, order", [((600, 8, 1100), "v_outer"), ((1100, 8, 600), "bt_outer")])
def test_multi_chunk_loop_orders(monkeypatch, shape, order):
    bt, h, v = shape
    tiling = _core._flce_grad_tiling(bt, h, v, 2, budget=1)
    assert tiling["v_outer"] == (order == "v_outer")
    assert tiling["num_bt_chunks"] >= 2 and tiling["num_v_chunks"] >= 2
    assert not tiling["grad_input_direct"] and not tiling["grad_weight_direct"]
    x, w, t = make_inputs(bt, h, v, BF16, seed=7)
    grad = np.random.default_rng(3).uniform(0.5, 1, bt).astype(np.float32)
    mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
    whole = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
    monkeypatch.setenv("TILEGRAD_FLCE_BUDGET", "1")
    mx2, s2, p2 = tg.fused_linear_online_max_sum(x, w, t, 0, v)[:3]
    np.testing.assert_allclose(mx2, mx, rtol=0, atol=0)
    np.testing.assert_allclose(s2, s, rtol=1e-5)
    np.testing.assert_allclose(p2, p, rtol=0, atol=0)
    chunked = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
    rgi, rgw = ref_grad(grad, x, w, np.zeros(bt, bool), t, mx, s, None, BF16)
    for got in (whole, chunked):
        assert rel_err(got[0], rgi) < GRAD_TOL[BF16]
        assert rel_err(got[1], rgw) < GRAD_TOL[BF16]
    assert rel_err(chunked[0], whole[0]) < 1e-2 and rel_err(chunked[1], whole[1]) < 1e-2


def test_non_contiguous_operands():
    bt, h, v = 19, 10, 31
    x, w, t = make_inputs(bt, h, v, np.float32, seed=11)
    grad = np.ones(bt, np.float32)
    mx, s, _, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
    base = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
    xt = np.asfortranarray(x)  # column-major: oneDNN takes it as is
    ws = np.zeros((v, 2 * h), np.float32)
    ws[:, ::2] = w  # column stride 2: copied into the workspace
    got = tg.fused_linear_cross_entropy_loss_grad(grad, xt, ws[:, ::2], mask, masked, logits_max=mx,
                                                  sum_exp_logits=s)
    for p, q in zip(got, base):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    fwd = tg.fused_linear_online_max_sum(xt, ws[:, ::2], t, 0, v)
    np.testing.assert_allclose(fwd[0], mx, rtol=1e-6)


def test_thread_count_does_not_change_results(threads):
    x, w, t = make_inputs(300, 64, 700, BF16, seed=12)
    grad = np.ones(300, np.float32)

    def run():
        mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, 700)
        gi, gw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
        return (mx, s, p, gi, gw) + tuple(tg.fused_linear_cross_entropy(x, w, t))

    threads(1)
    one = run()
    threads(2)
    two = run()
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_empty_shapes():
    h = 5
    x = np.zeros((0, h), np.float32)
    w = np.ones((4, h), np.float32)
    gi, gw = tg.fused_linear_cross_entropy_loss_grad(np.zeros(0, np.float32), x, w, np.zeros(0, np.uint8),
                                                     np.zeros(0, np.int64), logits_max=np.zeros(0, np.float32),
                                                     sum_exp_logits=np.zeros(0, np.float32))
    assert gi.shape == (0, h)
    np.testing.assert_array_equal(gw, 0.0)  # written with zeros (the vendor leaves it untouched)
    # V = 0: grad_input is a sum over nothing
    x = np.ones((3, h), np.float32)
    gi, gw = tg.fused_linear_cross_entropy_loss_grad(np.ones(3, np.float32), x, np.zeros((0, h), np.float32),
                                                     np.full(1, 7, np.uint8), np.zeros(3, np.int64),
                                                     logits_max=np.zeros(3, np.float32),
                                                     sum_exp_logits=np.ones(3, np.float32))
    np.testing.assert_array_equal(gi, 0.0)
    assert gw.shape == (0, h)
    # H = 0: logits are 0, so max = 0, sum_exp = V
    mx, s, p, mask, masked, lg = tg.fused_linear_online_max_sum(np.zeros((3, 0), BF16), np.zeros((6, 0), BF16),
                                                                np.array([0, 2, 9]), 0, 6, return_logits=True)
    np.testing.assert_array_equal(mx, 0.0)
    np.testing.assert_array_equal(s, 6.0)
    np.testing.assert_array_equal(p, 0.0)
    np.testing.assert_array_equal(mask, [0b100])
    np.testing.assert_array_equal(f64(lg), 0.0)
    # BT = 0 forward
    out = tg.fused_linear_online_max_sum(np.zeros((0, 3), np.float32), np.ones((2, 3), np.float32),
                                         np.zeros(0, np.int64), 0, 2)
    assert out[0].shape == (0,) and out[3].shape == (0,)


# ---------------------------------------------------------------- single-process fused op

# memory budgets forcing each plan for (BT, H, V) = (300, 16, 123): chunks of >= 128 rows need 123 * 4
# bytes per row (fp32 logits) + 123 * 2 (16-bit G) + the 123 x 16 fp32 accumulator (16-bit)
PLAN_BUDGETS = {"whole": 1 << 30, "chunked": 140000, "vocab_outer": 1}


@pytest.mark.parametrize("path", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_fused_linear_cross_entropy(dtype, reduction, path, monkeypatch):
    # "whole"/"chunked": three GEMMs per row chunk; "vocab_outer": forward blocks + memory-saving gradient
    monkeypatch.setenv("TILEGRAD_FLCE_BUDGET", str(PLAN_BUDGETS[path]))
    bt, h, v = 300, 16, 123
    plan = tg._fused_linear_cross_entropy.fused_linear_cross_entropy_plan(bt, h, v, dtype)
    assert plan["plan"] == path and (plan["num_chunks"] > 1) == (path == "chunked")
    x, w, t = make_inputs(bt, h, v, dtype, seed=13)
    t[[0, 7, 8]] = -100
    valid = t != -100
    n = valid.sum()
    scale = {"mean": 1.0 / n, "sum": 1.0, "none": 1.0}[reduction]
    grad = np.where(valid, scale, 0.0)
    tt = np.where(valid, t, 0)
    ref_loss, ref_gi, ref_gw = full_ce_reference(x, w, tt, grad)
    ref_loss = np.where(valid, ref_loss, 0.0)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction)
    assert loss.dtype == np.float32 and gi.dtype == gw.dtype == dtype
    expect = {"mean": ref_loss.sum() / n, "sum": ref_loss.sum(), "none": ref_loss}[reduction]
    np.testing.assert_allclose(loss, expect, rtol=2e-5, atol=2e-5)
    assert rel_err(gi, ref_gi) < GRAD_TOL[dtype]
    assert rel_err(gw, ref_gw) < GRAD_TOL[dtype]


def test_fused_linear_cross_entropy_paths_agree(monkeypatch):
    x, w, t = make_inputs(300, 24, 700, BF16, seed=16)
    t[::9] = -100
    whole = tg.fused_linear_cross_entropy(x, w, t)
    monkeypatch.setenv("TILEGRAD_FLCE_BUDGET", "1")  # several blocks in each direction
    blocks = tg.fused_linear_cross_entropy(x, w, t)
    np.testing.assert_allclose(whole[0], blocks[0], rtol=1e-6)
    for a, b in zip(whole[1:], blocks[1:]):
        assert rel_err(a, b) < 1e-2
    # non-contiguous operands take the block path (copies) and agree too
    monkeypatch.delenv("TILEGRAD_FLCE_BUDGET")
    wide = np.zeros((700, 48), BF16)
    wide[:, ::2] = w
    strided = tg.fused_linear_cross_entropy(x, wide[:, ::2], t)
    np.testing.assert_allclose(whole[0], strided[0], rtol=1e-6)
    assert rel_err(strided[2], whole[2]) < 1e-2


def test_fused_linear_cross_entropy_ignore_all_and_custom_index():
    x, w, t = make_inputs(6, 4, 9, np.float32)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, np.full(6, -100), reduction="mean")
    assert np.isnan(loss)
    np.testing.assert_array_equal(gi, 0.0)
    np.testing.assert_array_equal(gw, 0.0)
    t2 = t.copy()
    t2[2] = 5
    loss_a = tg.fused_linear_cross_entropy(x, w, t2, ignore_index=5, reduction="none")[0]
    assert loss_a[2] == 0.0 and np.all(loss_a[t2 != 5] > 0)


def test_fused_linear_cross_entropy_matches_torch():
    torch = pytest.importorskip("torch")
    x, w, t = make_inputs(50, 32, 200, np.float32, seed=14)
    t[3] = -100
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(xt @ wt.T, torch.tensor(t), ignore_index=-100)
    ref.backward()
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t)
    np.testing.assert_allclose(loss, ref.item(), rtol=1e-5)
    assert rel_err(gi, xt.grad.numpy()) < 2e-5
    assert rel_err(gw, wt.grad.numpy()) < 2e-5


def test_grad_op_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    x, w, t = make_inputs(40, 24, 150, np.float32, seed=15)
    g = np.random.default_rng(5).uniform(0.2, 2.0, 40).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ce = torch.nn.functional.cross_entropy(xt @ wt.T, torch.tensor(t), reduction="none")
    (ce * torch.tensor(g, dtype=torch.float64)).sum().backward()
    loss, gi, gw = run_sharded(x, w, t, g, 3, "mem")
    np.testing.assert_allclose(loss, ce.detach().numpy(), rtol=2e-5, atol=2e-5)
    assert rel_err(gi, xt.grad.numpy()) < 2e-5
    assert rel_err(gw, wt.grad.numpy()) < 2e-5


# ---------------------------------------------------------------- tiling

@pytest.mark.parametrize("threads", [1, 2, 3, 8, 64, 256])
@pytest.mark.parametrize("bt, h, v", [(1024, 2048, 32000), (1, 1, 1), (65536, 4096, 32000), (300, 64, 128256),
                                      (7, 3, 100000), (100000, 16, 50)])
@pytest.mark.parametrize("dsize, recompute", [(2, True), (4, True), (2, False), (4, False)])
def test_grad_tiling_invariants(bt, h, v, dsize, recompute, threads):
    t = _core._flce_grad_tiling(bt, h, v, dsize, recompute, threads=threads)
    assert t == _core._flce_grad_tiling(bt, h, v, dsize, recompute, threads=1)  # only the thread count differs
    bc, vc = t["bt_chunk"], t["v_chunk"]
    assert 1 <= bc <= bt and 1 <= vc <= v
    assert bc >= min(bt, 256) and vc >= min(v, 256)
    assert t["num_bt_chunks"] == -(-bt // bc) and t["num_v_chunks"] == -(-v // vc)
    assert t["grad_input_direct"] == (t["num_v_chunks"] == 1)
    assert t["grad_weight_direct"] == (t["num_bt_chunks"] == 1)
    if not t["grad_input_direct"]:
        assert t["acc_input_rows"] == (bt if t["v_outer"] else bc)
    if not t["grad_weight_direct"]:
        assert t["acc_weight_rows"] == (vc if t["v_outer"] else v)
    # the workspace is exactly the parts, each 64-byte aligned; no (BT x V) buffer
    a64 = lambda n: -(-n // 64) * 64
    block = bc * vc
    logits = block * 4 if recompute else 0
    g = 0 if (recompute and dsize == 4) else block * dsize
    assert t["logits_bytes"] == logits and t["g_bytes"] == (logits if g == 0 else g)
    assert t["acc_input_bytes"] == t["acc_input_rows"] * h * 4
    assert t["acc_weight_bytes"] == t["acc_weight_rows"] * h * 4
    assert t["workspace_bytes"] == a64(logits) + a64(g) + a64(t["acc_input_bytes"]) + a64(t["acc_weight_bytes"])
    if t["num_bt_chunks"] * t["num_v_chunks"] > 1:
        assert block < bt * v
    # the loop order gives the smaller workspace
    other = _core._flce_grad_tiling(bt, h, v, dsize, recompute, force_order=2 if t["v_outer"] else 1)
    assert t["workspace_bytes"] <= other["workspace_bytes"]


def test_grad_tiling_loop_order_choice():
    # many tokens, small vocabulary: keep grad_input whole per BT chunk and accumulate grad_weight (V x H)
    t = _core._flce_grad_tiling(100000, 1024, 4000, 2, True)
    assert not t["v_outer"] and t["acc_weight_rows"] == 4000 and t["acc_input_rows"] == 0
    # few tokens, large vocabulary: V-outer, grad_input accumulated (BT x H fp32)
    t = _core._flce_grad_tiling(1024, 2048, 32000, 2, True, budget=16 << 20)
    assert t["v_outer"] and t["acc_input_rows"] == 1024 and t["grad_weight_direct"]
    assert t["workspace_bytes"] < 64 << 20  # vs 1024 * 32000 * 6 bytes of whole logits + G
    # small problems: one block, both gradients written by their GEMMs, no accumulator
    t = _core._flce_grad_tiling(64, 40, 1000, 2, True)
    assert t["grad_input_direct"] and t["grad_weight_direct"]
    assert t["workspace_bytes"] == -(-64 * 1000 * 4 // 64) * 64 + -(-64 * 1000 * 2 // 64) * 64
    # a view oneDNN cannot take is copied: its bytes join the workspace
    u = _core._flce_grad_tiling(64, 40, 1000, 2, True, input_gemmable=False, weight_gemmable=False)
    assert u["input_copy_bytes"] == 64 * 40 * 2 and u["weight_copy_bytes"] == 1000 * 40 * 2
    assert u["workspace_bytes"] == t["workspace_bytes"] + -(-64 * 40 * 2 // 64) * 64 + 1000 * 40 * 2
    # an output oneDNN cannot write goes through an accumulator
    u = _core._flce_grad_tiling(64, 40, 1000, 2, True, grad_input_gemmable=False)
    assert not u["grad_input_direct"] and u["acc_input_rows"] == 64
    # empty problems need no workspace
    assert _core._flce_grad_tiling(0, 40, 1000, 2, True)["workspace_bytes"] == 0
    assert _core._flce_grad_tiling(5, 40, 0, 2, True)["workspace_bytes"] == 0


@pytest.mark.parametrize("bt, h, v", [(1024, 2048, 32000), (3, 2, 1), (100, 8, 1000000), (5000, 16, 300)])
@pytest.mark.parametrize("budget", [1, 1 << 20, 32 << 20])
def test_forward_tiling(bt, h, v, budget):
    t = _core._flce_forward_tiling(bt, h, v, 2, budget=budget)
    assert t["bt_chunk"] >= min(bt, 256) and t["v_chunk"] >= min(v, 256)
    assert t["logits_bytes"] == t["bt_chunk"] * t["v_chunk"] * 4
    assert t["workspace_bytes"] == -(-t["logits_bytes"] // 64) * 64
    if t["logits_bytes"] > budget:  # only the minimum chunk sizes may exceed the budget
        assert t["bt_chunk"] == min(bt, 256) or t["v_chunk"] <= max(256, min(v, 512))


# ---------------------------------------------------------------- errors: Python

def test_python_errors():
    x, w, t = make_inputs(4, 3, 5, np.float32)
    with pytest.raises(TypeError):
        tg.fused_linear_online_max_sum([[1.0]], w, t, 0, 5)
    with pytest.raises(ValueError, match="vocabEndIndex - vocabStartIndex") as e:
        tg.fused_linear_online_max_sum(x, w, t, 0, 6)
    assert e.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(ValueError, match="vocabStartIndex must be >= 0"):
        tg.fused_linear_online_max_sum(x, w, t, -1, 4)
    with pytest.raises(ValueError, match="weight dtype"):
        tg.fused_linear_online_max_sum(x, w.astype(np.float16), t, 0, 5)
    with pytest.raises(ValueError, match="target dtype"):
        tg.fused_linear_online_max_sum(x, w, t.astype(np.float32), 0, 5)
    with pytest.raises(ValueError, match="labelSmoothing must be 0"):
        tg.fused_cross_entropy_loss_with_max_sum(np.zeros(4, np.float32), np.ones(4, np.float32),
                                                 np.zeros(4, np.float32), 0.1)
    mask, mt = np.zeros(1, np.uint8), t
    g = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="logitsMaxOptional and sumExpLogitsOptional are required") as e:
        tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, mt)
    assert e.value.code == ACLNN_ERR_PARAM_NULLPTR
    sm = np.zeros((4, 5), np.float32)
    with pytest.raises(IndexError, match=r"maskedTarget\[1\] = 5 is out of range") as e:
        tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, np.array([0, 5, 7, 1]), softmax=sm)
    assert e.value.code == ACLNN_ERR_PARAM_INVALID
    # masked rows may hold anything
    tg.fused_linear_cross_entropy_loss_grad(g, x, w, np.array([0b0110], np.uint8), np.array([0, 5, 7, 1]),
                                            softmax=sm)
    with pytest.raises(ValueError, match="holds fewer than BT"):
        tg.fused_linear_cross_entropy_loss_grad(np.ones(9, np.float32), np.ones((9, 3), np.float32), w, mask,
                                                np.zeros(9, np.int64), softmax=np.zeros((9, 5), np.float32))
    with pytest.raises(ValueError, match="targetMask shape"):
        tg.fused_linear_cross_entropy_loss_grad(g, x, w, np.zeros(3, bool), mt, softmax=sm)
    with pytest.raises(ValueError, match="softmaxOptional shape"):
        tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, mt, softmax=np.zeros((4, 6), np.float32))
    with pytest.raises(IndexError, match=r"target\[2\] = 9 is out of range"):
        tg.fused_linear_cross_entropy(x, w, np.array([0, 1, 9, 10]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        tg.fused_linear_cross_entropy(x, w, t, reduction="avg")
    with pytest.raises(ValueError, match="input must have rank 2"):
        tg.fused_linear_cross_entropy(x[0], w, t)


# ---------------------------------------------------------------- errors and behaviour: C ABI

def _grad_args(t, g, x, w, mask, mt, mx, s, sm, gi, gw, ls=0.0):
    return [t.new(g), t.new(x), t.new(w), t.new(mask), t.new(mt), ctypes.c_float(ls), t.new(mx), t.new(s),
            t.new(sm), t.new(gi), t.new(gw)]


def test_c_abi_round_trip_and_strided_outputs():
    bt, h, v = 12, 6, 40
    x, w, t = make_inputs(bt, h, v, BF16, seed=21)
    mx, s, p = (np.empty(bt, np.float32) for _ in range(3))
    mask, mt = np.empty(2, np.uint8), np.empty(bt, np.int64)
    logits = np.empty((bt, v), BF16)
    with AclTensors() as tt:
        st, msg = run_op(OMS, [tt.new(x), tt.new(w), tt.new(t), ctypes.c_int64(0), ctypes.c_int64(v), tt.new(mx),
                               tt.new(s), tt.new(p), tt.new(mask), tt.new(mt), tt.new(logits)])
    assert st == ACLNN_SUCCESS, msg
    ref = tg.fused_linear_online_max_sum(x, w, t, 0, v, return_logits=True)
    for a, b in zip((mx, s, p, mask, mt, logits), ref):
        np.testing.assert_array_equal(a, b)
    loss, sm = np.empty(bt, np.float32), np.empty((bt, v), np.float32)
    with AclTensors() as tt:
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(p), ctypes.c_float(0.0), None, None, tt.new(logits),
                                tt.new(loss), tt.new(sm)])
    assert st == ACLNN_SUCCESS, msg
    grad = np.ones(bt, np.float32)
    # outputs as strided views (every other row / column of larger buffers)
    gi_buf, gw_buf = np.zeros((2 * bt, 2 * h), BF16), np.zeros((v, 3 * h), BF16)
    gi, gw = gi_buf[::2, ::2], gw_buf[:, ::3]
    for mode in ("mem", "hp"):
        with AclTensors() as tt:
            st, msg = run_op(GRAD, _grad_args(tt, grad, x, w, mask, mt, mx if mode == "mem" else None,
                                              s if mode == "mem" else None, sm if mode == "hp" else None, gi, gw))
        assert st == ACLNN_SUCCESS, msg
        rgi, rgw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, mt, logits_max=mx, sum_exp_logits=s,
                                                           softmax=sm if mode == "hp" else None)
        assert rel_err(gi, rgi) < 1e-2 and rel_err(gw, rgw) < 1e-2
        assert np.all(f64(gi_buf[1::2]) == 0) and np.all(f64(gw_buf[:, 1::3]) == 0)


def test_c_abi_errors():
    bt, h, v = 6, 4, 10
    x, w, t = make_inputs(bt, h, v, np.float16, seed=22)
    g = np.ones(bt, np.float32)
    mask, mt = np.zeros(1, np.uint8), t.copy()
    mx, s = np.zeros(bt, np.float32), np.ones(bt, np.float32)
    sm = np.zeros((bt, v), np.float32)
    gi, gw = np.empty((bt, h), np.float16), np.empty((v, h), np.float16)
    with AclTensors() as tt:
        def grad_call(**over):
            args = dict(g=g, x=x, w=w, mask=mask, mt=mt, mx=mx, s=s, sm=None, gi=gi, gw=gw, ls=0.0)
            args.update(over)
            return run_op(GRAD, _grad_args(tt, **args))

        assert grad_call()[0] == ACLNN_SUCCESS
        st, msg = grad_call(mx=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "logitsMaxOptional" in msg
        assert grad_call(mx=None, s=None, sm=sm)[0] == ACLNN_SUCCESS
        st, msg = grad_call(g=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "grad" in msg
        st, msg = grad_call(gw=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "weightGradOut" in msg
        st, msg = grad_call(g=g.astype(np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "grad dtype" in msg
        st, msg = grad_call(gi=np.empty((bt, h), np.float32))
        assert st == ACLNN_ERR_PARAM_INVALID and "inputGradOut dtype" in msg
        st, msg = grad_call(mask=mask.astype(np.int32))
        assert st == ACLNN_ERR_PARAM_INVALID and "targetMask dtype" in msg
        st, msg = grad_call(gw=np.empty((h, v), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "weightGradOut shape [4,10] != (V, H) [10,4]" in msg
        st, msg = grad_call(x=np.ones((bt + 1, h), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "input shape" in msg
        st, msg = grad_call(ls=0.1)
        assert st == ACLNN_ERR_PARAM_INVALID and "labelSmoothing" in msg
        st, msg = grad_call(gi=x)
        assert st == ACLNN_ERR_PARAM_INVALID and "overlaps" in msg
        # private format
        st, ws, ex = get_workspace_size(GRAD, [tt.new(g), tt.new(x, fmt=29), tt.new(w), tt.new(mask), tt.new(mt),
                                               ctypes.c_float(0.0), tt.new(mx), tt.new(s), None, tt.new(gi),
                                               tt.new(gw)])
        assert st == ACLNN_ERR_PARAM_INVALID
        # data-dependent error at launch; second launch; too-small workspace
        bad = mt.copy()
        bad[3] = v
        st, ws, ex = get_workspace_size(GRAD, _grad_args(tt, g, x, w, mask, bad, mx, s, None, gi, gw))
        assert st == ACLNN_SUCCESS and ws > 0
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert "maskedTarget[3] = 10 is out of range [0, 10)" in last_error()
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID  # the executor was released
        st, ws, ex = get_workspace_size(GRAD, _grad_args(tt, g, x, w, mask, mt, mx, s, None, gi, gw))
        assert launch(GRAD, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
        assert "smaller than" in last_error()
        assert launch(GRAD, ex, ws) == ACLNN_SUCCESS
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID

        # forward
        outs = [np.empty(bt, np.float32) for _ in range(3)] + [np.empty(1, np.uint8), np.empty(bt, np.int64)]

        def fwd(start=0, end=v, **over):
            a = dict(x=x, w=w, t=t, mx=outs[0], s=outs[1], p=outs[2], mask=outs[3], mt=outs[4], lg=None)
            a.update(over)
            return run_op(OMS, [tt.new(a["x"]), tt.new(a["w"]), tt.new(a["t"]), ctypes.c_int64(start),
                                ctypes.c_int64(end), tt.new(a["mx"]), tt.new(a["s"]), tt.new(a["p"]),
                                tt.new(a["mask"]), tt.new(a["mt"]), tt.new(a["lg"])])

        assert fwd()[0] == ACLNN_SUCCESS
        st, msg = fwd(t=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "target" in msg
        st, msg = fwd(start=-1, end=v - 1)
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabStartIndex must be >= 0, got -1" in msg
        st, msg = fwd(start=5, end=4)
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabEndIndex must be >= vocabStartIndex" in msg
        st, msg = fwd(start=3, end=3 + v + 1)
        assert st == ACLNN_ERR_PARAM_INVALID and "must equal weight rows 10" in msg
        st, msg = fwd(mt=np.empty(bt, np.int32))
        assert st == ACLNN_ERR_PARAM_INVALID and "maskedTargetOut dtype" in msg
        st, msg = fwd(mask=np.empty(2, np.uint8))
        assert st == ACLNN_ERR_PARAM_INVALID and "targetMaskOut shape" in msg
        st, msg = fwd(lg=np.empty((bt, v), np.float32))
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabParallelLogitsOutOptional dtype" in msg
        st, msg = fwd(x=np.ones((bt, h + 1), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "hidden size" in msg

        # loss with max sum
        loss = np.empty(bt, np.float32)
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, tt.new(sm),
                                tt.new(loss), None])
        assert st == ACLNN_ERR_PARAM_NULLPTR and "softMaxOutOptional is required" in msg
        st, msg = run_op(LWMS, [tt.new(mx), None, tt.new(mx), ctypes.c_float(0.0), None, None, None, tt.new(loss),
                                None])
        assert st == ACLNN_ERR_PARAM_NULLPTR and "sumExpLogits" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.5), None, None, None,
                                tt.new(loss), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "labelSmoothing must be 0, got 0.5" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, None,
                                tt.new(np.empty(bt + 1, np.float32)), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "lossOut shape" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, None,
                                tt.new(mx), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "overlaps" in msg
