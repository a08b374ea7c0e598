"""Vocabulary-parallel fused linear cross entropy (specification section 5) through Python:
tg.fused_linear_online_max_sum, tg.fused_cross_entropy_loss_with_max_sum,
tg.fused_linear_cross_entropy_loss_grad and the single-process tg.fused_linear_cross_entropy with its
options (linear bias, class weights, label smoothing, z-loss, softcap, grad_output; issue 12) and plans,
against the float64 NumPy references (reference/fused_linear_cross_entropy.py, written from the spec);
hostile input (issue 14: zero-width work in closed form, exact argument types). The C ABI:
test_fused_linear_cross_entropy_c_abi.py; tilings and plans: test_fused_linear_cross_entropy_tiling.py."""

import os

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
from reference.fused_linear_cross_entropy import (f64, linear_cross_entropy, pack_lsb_first, padding_bit,
                                                  zero_width_loss)
from reference.fused_linear_cross_entropy import loss_grad as ref_grad
from reference.fused_linear_cross_entropy import online_max_sum as ref_forward
from tilegrad import _core
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
DTYPES = [F32, np.dtype(np.float16), BF16]
# max |error| / max |exact| allowed for the gradients (G is rounded once to the input dtype).
GRAD_TOL = {F32: 2e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}
# memory budgets forcing each plan for (BT, H, V) = (300, 16, 123): chunks of >= 128 rows need 123 * 4
# bytes per row (fp32 logits) + 123 * 2 (16-bit G) + the 123 x 16 fp32 accumulator (16-bit)
PLAN_BUDGETS = {"whole": 1 << 30, "chunked": 140000, "vocab_outer": 1}


def rel_err(a, b):
    a, b = f64(a), f64(b)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def make_inputs(bt, h, v, dtype, seed=0, tdtype=np.int64, ignore=()):
    """(x, w, target) with the rows in ``ignore`` (those < bt) set to ignore_index -100."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((bt, h)) * 0.7).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((v, h)) * 0.5).astype(np.float32).astype(dtype)
    t = rng.integers(0, max(v, 1), bt).astype(tdtype)
    t[[i for i in ignore if i < bt]] = -100
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
    ref_loss, _, ref_gi, ref_gw, _ = linear_cross_entropy(x, w, t, "none", grad_output=grad)
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
        ref_loss, _, ref_gi, ref_gw, _ = linear_cross_entropy(x, w, t, "none", grad_output=grad)
        np.testing.assert_allclose(loss, ref_loss, rtol=3e-5, atol=3e-5)
        assert rel_err(gi, ref_gi) < 2 * GRAD_TOL[dtype]
        assert rel_err(gw, ref_gw) < 2 * GRAD_TOL[dtype]


# ---------------------------------------------------------------- forward ops in detail

@pytest.mark.parametrize("start, end", [(40, 45), (0, 3), (7, 7), (0, 0), (12, 20)])
def test_online_max_sum_vocab_range_shorter_than_weight(start, end):
    """vocabEndIndex - vocabStartIndex <= V (the vendor's examples and system tests use < V): max and
    sum-exp over all V columns, targets masked against [start, end), padding bits of a target 0."""
    x, w, _ = make_inputs(13, 16, 8, np.float32, seed=11)
    t = np.array([start, end - 1, end, start + 7, 0, 3, start - 1, 44, end + 1, start, 19, 2, 6], np.int64)
    mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, start, end)
    rmx, rs, rp, rmask, rmasked, _ = ref_forward(x, w, t, start, end)
    np.testing.assert_allclose(mx, rmx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s, rs, rtol=1e-6)
    np.testing.assert_allclose(p, rp, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(mask, pack_lsb_first(rmask, padding=padding_bit(start, end)))
    np.testing.assert_array_equal(masked, rmasked)


def test_online_max_sum_vocab_range_longer_than_weight_is_refused():
    x, w, t = make_inputs(4, 16, 8, np.float32, seed=12)
    with pytest.raises(ValueError, match=r"vocabEndIndex - vocabStartIndex must be <= weight rows 8, got 9"):
        tg.fused_linear_online_max_sum(x, w, t, 10, 19)


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
    np.testing.assert_array_equal(mask, pack_lsb_first(rmask, padding=True))  # LSB first; start > 0: padding 1
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

@pytest.mark.parametrize("path", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_fused_linear_cross_entropy(dtype, reduction, path, monkeypatch):
    # "whole"/"chunked": three GEMMs per row chunk; "vocab_outer": forward blocks + memory-saving gradient
    monkeypatch.setenv("TILEGRAD_FLCE_BUDGET", str(PLAN_BUDGETS[path]))
    bt, h, v = 300, 16, 123
    plan = fused_linear_cross_entropy_plan(bt, h, v, dtype)
    assert plan["plan"] == path and (plan["num_chunks"] > 1) == (path == "chunked")
    x, w, t = make_inputs(bt, h, v, dtype, seed=13)
    t[[0, 7, 8]] = -100
    valid = t != -100
    n = valid.sum()
    scale = {"mean": 1.0 / n, "sum": 1.0, "none": 1.0}[reduction]
    grad = np.where(valid, scale, 0.0)
    tt = np.where(valid, t, 0)
    ref_loss, _, ref_gi, ref_gw, _ = linear_cross_entropy(x, w, tt, "none", grad_output=grad)
    ref_loss = np.where(valid, ref_loss, 0.0)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction)
    assert loss.dtype == np.float32 and gi.dtype == gw.dtype == dtype
    expect = {"mean": ref_loss.sum() / n, "sum": ref_loss.sum(), "none": ref_loss}[reduction]
    np.testing.assert_allclose(loss, expect, rtol=2e-5, atol=2e-5)
    assert rel_err(gi, ref_gi) < GRAD_TOL[dtype]
    assert rel_err(gw, ref_gw) < GRAD_TOL[dtype]


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16)], ids=["bf16", "f16"])
def test_16_bit_gemms_without_native_onednn_support(tmp_path, dtype):
    """Capped below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, as on an AVX2-only CPU) oneDNN has no bf16 matmul:
    the GEMMs run in fp32 on exactly widened copies; every FLCE operator still computes the reference."""
    import subprocess
    import sys
    x, w, t = make_inputs(200, 16, 300, dtype, seed=21)
    np.savez(tmp_path / "in.npz", x=x.view(np.uint16), w=w.view(np.uint16), t=t)
    script = f"""
import numpy as np, ml_dtypes, tilegrad as tg
d = np.load({str(tmp_path / 'in.npz')!r}); dt = np.dtype({dtype.name!r}) if {dtype.name!r} != 'bfloat16' else np.dtype(ml_dtypes.bfloat16)
x, w, t = d['x'].view(dt), d['w'].view(dt), d['t']
loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, memory_budget=1)
mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, w.shape[0])
g = np.full(x.shape[0], 1.0 / x.shape[0], np.float32)
agi, agw = tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
np.savez({str(tmp_path / 'out.npz')!r}, loss=loss, gi=gi.astype(np.float32), gw=gw.astype(np.float32),
         agi=agi.astype(np.float32), agw=agw.astype(np.float32))
"""
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=300)
    out = np.load(tmp_path / "out.npz")
    ref_loss, _, ref_gi, ref_gw, _ = linear_cross_entropy(x, w, t)
    np.testing.assert_allclose(out["loss"], ref_loss, rtol=2e-5)
    for gi, gw in ((out["gi"], out["gw"]), (out["agi"], out["agw"])):
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


# ---------------------------------------------------------------- single-process options (issue 12)
# linear bias, class weights, label smoothing, z-loss, softcap, grad_output, the three plans, and
# bit-identical results for 1, 2 and 3 threads, against reference.fused_linear_cross_entropy's composite

# max |error| / max |exact| of the gradients (G is rounded once to the input dtype)
OPTIONS_GRAD_TOL = {F32: 3e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}
BT, H, V = 300, 16, 123
OPTIONS_IGNORED = (0, 7, 8)  # rows with target ignore_index


def check_against_reference(dtype, reduction, kwargs, got, rtol_loss=2e-5):
    x, w, t = kwargs.pop("_inputs")
    ref = linear_cross_entropy(x, w, t, reduction=reduction, **kwargs)
    loss, gi, gw = got[:3]
    np.testing.assert_allclose(loss, ref[0], rtol=rtol_loss, atol=2e-5)
    assert rel_err(gi, ref[2]) < OPTIONS_GRAD_TOL[dtype]
    assert rel_err(gw, ref[3]) < OPTIONS_GRAD_TOL[dtype]
    k = 3
    if kwargs.get("bias") is not None:
        assert got[k].dtype == dtype and rel_err(got[k], ref[4]) < OPTIONS_GRAD_TOL[dtype]
        k += 1
    if kwargs.get("lse_square_scale", 0.0):
        np.testing.assert_allclose(got[k], ref[1], rtol=rtol_loss, atol=2e-5)
        k += 1
    assert len(got) == k


FEATURES = {
    "bias": lambda rng, dt: dict(bias=(rng.standard_normal(V) * 0.5).astype(np.float32).astype(dt)),
    "class_weight": lambda rng, dt: dict(class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32)),
    "smoothing": lambda rng, dt: dict(label_smoothing=0.1),
    "smoothing_weighted": lambda rng, dt: dict(label_smoothing=0.2, class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32)),
    "zloss": lambda rng, dt: dict(lse_square_scale=1e-2),
    "softcap": lambda rng, dt: dict(softcap=3.0),
    "all": lambda rng, dt: dict(bias=(rng.standard_normal(V) * 0.5).astype(np.float32).astype(dt),
                                class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32), label_smoothing=0.1,
                                lse_square_scale=1e-3, softcap=5.0),
}


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
def test_features_match_reference(dtype, feature, reduction, plan):
    rng = np.random.default_rng(list(FEATURES).index(feature))  # not hash(): randomised per process
    x, w, t = make_inputs(BT, H, V, dtype, seed=3, ignore=OPTIONS_IGNORED)
    kwargs = FEATURES[feature](rng, dtype)
    assert fused_linear_cross_entropy_plan(BT, H, V, dtype, memory_budget=PLAN_BUDGETS[plan])["plan"] == plan
    got = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction, memory_budget=PLAN_BUDGETS[plan], **kwargs)
    check_against_reference(dtype, reduction, dict(kwargs, _inputs=(x, w, t)), got)


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_grad_output(reduction, plan):
    x, w, t = make_inputs(BT, H, V, F32, seed=4, ignore=OPTIONS_IGNORED)
    rng = np.random.default_rng(9)
    go = rng.uniform(-2.0, 2.0, BT).astype(np.float32) if reduction == "none" else np.float32(-1.75)
    kw = dict(label_smoothing=0.05, lse_square_scale=1e-3)
    got = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction, grad_output=go,
                                        memory_budget=PLAN_BUDGETS[plan], **kw)
    check_against_reference(F32, reduction, dict(kw, grad_output=go, _inputs=(x, w, t)), got)


def test_grad_output_scalar_for_none_and_errors():
    x, w, t = make_inputs(20, 8, 30, F32, seed=5)
    one = tg.fused_linear_cross_entropy(x, w, t, reduction="none")
    half = tg.fused_linear_cross_entropy(x, w, t, reduction="none", grad_output=0.5)
    np.testing.assert_array_equal(one[0], half[0])
    np.testing.assert_allclose(half[1], one[1] * 0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="grad_output"):
        tg.fused_linear_cross_entropy(x, w, t, reduction="mean", grad_output=np.ones(20, np.float32))
    with pytest.raises(ValueError, match="grad_output"):
        tg.fused_linear_cross_entropy(x, w, t, reduction="none", grad_output=np.ones(19, np.float32))
    with pytest.raises(ValueError, match="label_smoothing"):
        tg.fused_linear_cross_entropy(x, w, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="lse_square_scale"):
        tg.fused_linear_cross_entropy(x, w, t, lse_square_scale=-1.0)
    with pytest.raises(ValueError, match="softcap"):
        tg.fused_linear_cross_entropy(x, w, t, softcap=-2.0)
    with pytest.raises(ValueError, match="bias"):
        tg.fused_linear_cross_entropy(x, w, t, bias=np.zeros(29, np.float32))
    with pytest.raises(ValueError, match="bias"):
        tg.fused_linear_cross_entropy(x, w, t, bias=np.zeros(30, np.float64))
    with pytest.raises(ValueError, match="class_weight"):
        tg.fused_linear_cross_entropy(x, w, t, class_weight=np.ones(31, np.float32))
    with pytest.raises(ValueError, match="memory_budget"):
        tg.fused_linear_cross_entropy(x, w, t, memory_budget=0)
    for bad in (-1.0, float("nan"), float("inf"), "bogus"):
        with pytest.raises(ValueError, match="filter_eps"):
            tg.fused_linear_cross_entropy(x, w, t, filter_eps=bad)
    for bad in (True, [0.1]):
        with pytest.raises(TypeError, match="filter_eps"):
            tg.fused_linear_cross_entropy(x, w, t, filter_eps=bad)


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
def test_softcap_inf_is_no_cap(plan):
    """softcap * tanh(z / softcap) tends to z: inf is no cap, as None (which the float64 reference
    checks); 0 and negative caps are refused, naming what to pass instead."""
    x, w, t = make_inputs(BT, H, V, BF16, seed=7, ignore=OPTIONS_IGNORED)
    plain = tg.fused_linear_cross_entropy(x, w, t, memory_budget=PLAN_BUDGETS[plan])
    check_against_reference(BF16, "mean", dict(_inputs=(x, w, t)), plain)
    uncapped = tg.fused_linear_cross_entropy(x, w, t, softcap=float("inf"), memory_budget=PLAN_BUDGETS[plan])
    assert [a.tobytes() for a in uncapped] == [a.tobytes() for a in plain]
    for bad in (0.0, -2.0, float("-inf"), float("nan")):
        with pytest.raises(ValueError, match=r"softcap must be a float > 0, or None / inf for no cap, got"):
            tg.fused_linear_cross_entropy(x, w, t, softcap=bad)


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
def test_mean_with_every_row_ignored_gives_zero_gradients(plan):
    x, w, t = make_inputs(BT, H, V, BF16, seed=6, ignore=OPTIONS_IGNORED)
    t[:] = -100
    b = np.ones(V, BF16)
    loss, gi, gw, gb, zl = tg.fused_linear_cross_entropy(x, w, t, bias=b, lse_square_scale=0.1, label_smoothing=0.1,
                                                         memory_budget=PLAN_BUDGETS[plan])
    assert np.isnan(loss) and np.isnan(zl)  # 0 / 0, as PyTorch
    for g in (gi, gw, gb):
        np.testing.assert_array_equal(f64(g), 0.0)


def test_empty_hidden_size_still_gives_the_bias_gradient():
    # H = 0: the logits are the bias alone; grad_input / grad_weight are empty, grad_bias is not zero
    x, w = np.zeros((5, 0), np.float32), np.zeros((7, 0), np.float32)
    t = np.array([0, 3, -100, 6, 3])
    b = np.linspace(-1.0, 2.0, 7).astype(np.float32)
    kw = dict(bias=b, label_smoothing=0.1, softcap=2.0, lse_square_scale=0.01)
    got = tg.fused_linear_cross_entropy(x, w, t, **kw)
    ref = linear_cross_entropy(x, w, t, **kw)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    np.testing.assert_allclose(got[3], ref[4], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[4], ref[1], rtol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
def test_plans_agree(dtype):
    x, w, t = make_inputs(BT, H, V, dtype, seed=7, ignore=OPTIONS_IGNORED)
    rng = np.random.default_rng(2)
    kw = FEATURES["all"](rng, dtype)
    outs = {p: tg.fused_linear_cross_entropy(x, w, t, memory_budget=b, **kw) for p, b in PLAN_BUDGETS.items()}
    for p in ("chunked", "vocab_outer"):
        np.testing.assert_allclose(outs[p][0], outs["whole"][0], rtol=1e-5)
        np.testing.assert_allclose(outs[p][4], outs["whole"][4], rtol=1e-5)
        for a, b in zip(outs[p][1:4], outs["whole"][1:4]):
            assert rel_err(a, b) < (1e-5 if dtype == F32 else 1e-2)


DET_SHAPES = [(2048, 16, 16), (4096, 64, 128), (16384, 32, 64)]


@pytest.mark.parametrize("shape", DET_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
def test_bit_identical_for_1_2_3_threads(shape, dtype, plan, threads):
    bt, h, v = shape
    x, w, t = make_inputs(bt, h, v, dtype, seed=8, ignore=OPTIONS_IGNORED)
    rng = np.random.default_rng(4)
    budget = {"whole": 1 << 30, "chunked": 200 * v * 6 + v * h * 4 + 4096, "vocab_outer": 1}[plan]
    assert fused_linear_cross_entropy_plan(bt, h, v, dtype, memory_budget=budget)["plan"] == plan
    kw = dict(bias=rng.standard_normal(v).astype(np.float32).astype(dtype), label_smoothing=0.1,
              lse_square_scale=1e-3, memory_budget=budget)
    g = np.full(bt, 1.0 / bt, np.float32)
    runs = []
    for n in (1, 2, 3):
        threads(n)
        plain = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget)
        extra = tg.fused_linear_cross_entropy(x, w, t, **kw)
        mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
        grads = tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
        runs.append(tuple(plain) + tuple(extra) + (mx, s, p) + tuple(grads))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))


# ---------------------------------------------------------------- hostile input (issue 14, defects 3, 5, 6)
# zero-width work in closed form, integers that must be integers, strings exact, label smoothing exactly 0

def test_online_max_sum_with_zero_hidden_size_is_closed_form_for_any_vocabulary():
    # V = 2^40 rows of width 0: no byte of input or output grows with V, so neither may the work
    # (this used to loop over the vocabulary for hours).
    vocab = 2**40
    target = np.array([3, vocab + 5, -1], np.int64)
    mx, sm, pred, mask, masked, logits = tg.fused_linear_online_max_sum(
        np.zeros((3, 0), np.float32), np.zeros((vocab, 0), np.float32), target, 0, vocab)
    # every logit is an empty dot product: 0; so max 0, sum of exp(0 - 0) over V, target logit 0
    np.testing.assert_array_equal(mx, np.zeros(3, np.float32))
    np.testing.assert_array_equal(sm, np.full(3, float(vocab), np.float32))
    np.testing.assert_array_equal(pred, np.zeros(3, np.float32))
    assert np.unpackbits(mask, bitorder="little")[:3].tolist() == [0, 1, 1]
    assert masked.tolist() == [3, 0, 0] and logits is None


def test_online_max_sum_zero_width_matches_the_general_path_on_a_small_vocabulary():
    # the closed form agrees with the GEMM path (forced by asking for the logits) where both run
    target = np.array([0, 4, 9], np.int64)
    closed = tg.fused_linear_online_max_sum(np.zeros((3, 0), np.float32), np.zeros((7, 0), np.float32), target, 2, 9)
    general = tg.fused_linear_online_max_sum(np.zeros((3, 0), np.float32), np.zeros((7, 0), np.float32), target, 2,
                                             9, True)
    for a, b in zip(closed[:5], general[:5]):
        np.testing.assert_array_equal(a, b)


X, W, T = np.ones((4, 8), np.float32), np.ones((10, 8), np.float32), np.zeros(4, np.int64)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(ignore_index=1.5), TypeError, "ignore_index"),
    (dict(ignore_index=2**63), ValueError, "ignore_index"),
    (dict(reduction="mean\0x"), ValueError, "reduction"),
    (dict(reduction=None), TypeError, "reduction"),
    (dict(label_smoothing="0.1"), TypeError, "label_smoothing"),
    (dict(memory_budget=2.5), TypeError, "memory_budget"),
])
def test_fused_linear_cross_entropy_argument_types(kwargs, error, words):
    with pytest.raises(error, match=words):
        tg.fused_linear_cross_entropy(X, W, T, **kwargs)


@pytest.mark.parametrize("start, end, error", [(0.5, 10, TypeError), (0, "10", TypeError), (0, 2**64, ValueError)])
def test_online_max_sum_vocab_range_must_be_integers(start, end, error):
    with pytest.raises(error, match="vocab_"):
        tg.fused_linear_online_max_sum(X, W, T, start, end)


@pytest.mark.parametrize("value", [1e-50, 0.1, -0.0 + 1e-300])
def test_loss_with_max_sum_label_smoothing_must_be_exactly_zero(value):
    stats = np.zeros(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="labelSmoothing must be 0"):
        tg.fused_cross_entropy_loss_with_max_sum(*stats, value)
    loss, _ = tg.fused_cross_entropy_loss_with_max_sum(*stats, 0.0)
    np.testing.assert_array_equal(loss, np.zeros(4, np.float32))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_zero_hidden_size_is_closed_form(reduction):
    target = np.array([3, -100, 6, 0], np.int64)
    x = np.zeros((4, 0), np.float32)
    # a vocabulary no byte of data grows with: must not take time proportional to it
    huge = 2**40
    loss, gi, gw = tg.fused_linear_cross_entropy(x, np.zeros((huge, 0), np.float32), target, reduction=reduction)[:3]
    np.testing.assert_allclose(loss, zero_width_loss(target, huge, -100, reduction, None, 0.0, 0.0), rtol=1e-6)
    assert gi.shape == (4, 0) and gw.shape == (huge, 0)
    # small vocabulary with every feature that keeps the logits 0: class weights, smoothing, z-loss
    cw = np.linspace(0.5, 2.0, 7).astype(np.float32)
    loss, _, _, zl = tg.fused_linear_cross_entropy(x, np.zeros((7, 0), np.float32), target, reduction=reduction,
                                                   class_weight=cw, label_smoothing=0.2, lse_square_scale=1e-2)
    np.testing.assert_allclose(loss, zero_width_loss(target, 7, -100, reduction, cw, 0.2, 1e-2), rtol=1e-5)
