"""Gradient filtering of tg.fused_linear_cross_entropy (``filter_eps``, issue 12 requirement 4) against a
float64 NumPy reference of the filtered gradients.

The approximation is defined on a block grid: within each G block of the plan (row chunks of
``chunk_rows`` for "whole"/"chunked"; ``bt_chunk`` x ``v_chunk`` for "vocab_outer"), blocks of 64 rows x
128 vocabulary columns are dropped from both gradient products when every entry of the unscaled
softmax gradient ``p - onehot(target)`` is below ``eps`` in magnitude. The loss is never filtered.
The reference (reference/fused_linear_cross_entropy.py) rebuilds that grid from the plan; the tests
pick ``eps`` between two block maxima that are far apart, so rounding can not move a block across the
threshold.
"""

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from reference.fused_linear_cross_entropy import block_maxima, f64, filtered_reference, softmax_grad
from tilegrad._fused_linear_cross_entropy import filter_threshold, fused_linear_cross_entropy_plan

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BT, H, V = 512, 24, 1000
# budgets forcing each plan at (BT, H, V) (checked in the test)
PLAN_BUDGETS = {"whole": 1 << 30, "chunked": 1_200_000, "vocab_outer": 1}
# max |error| / max |reference| of the gradients (G rounded once to the input dtype)
GRAD_TOL = {F32: 3e-5, F16: 4e-3, BF16: 3e-2}


def rel_err(a, b):
    a, b = f64(a), f64(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def text_like(bt, h, v, dtype, seed=0):
    """Softmax mass in a few hundred frequent columns per row (a Zipf prior over the token ids through
    hidden unit 0) plus a context part favouring the row's target; targets Zipf-distributed."""
    rng = np.random.default_rng(seed)
    rank = np.arange(1, v + 1, dtype=np.float64)
    t = rng.choice(v, size=bt, p=(1 / rank) / (1 / rank).sum()).astype(np.int64)
    e = rng.standard_normal((v, h - 1))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    w = np.concatenate([-np.log(rank)[:, None] / 4.0, e], axis=1)
    x = np.concatenate([np.full((bt, 1), 8.0), 4.0 * e[t] + rng.standard_normal((bt, h - 1)) / np.sqrt(h)], axis=1)
    return x.astype(np.float32).astype(dtype), w.astype(np.float32).astype(dtype), t


def grid(plan):
    """(row chunk, vocabulary chunk) of the plan's G blocks."""
    if plan["plan"] == "vocab_outer":
        return plan["bt_chunk"], plan["v_chunk"]
    return plan["chunk_rows"], V


def separated_eps(maxima, keep_fraction):
    """A threshold between two block maxima at least 20% apart, keeping about keep_fraction of the
    blocks (so rounding of G can not move any block across it)."""
    values = np.sort(np.array([m for m in maxima.values() if m > 0]))
    ratios = values[1:] / values[:-1]
    gaps = np.flatnonzero(ratios > 1.2)
    assert gaps.size, "no separated block maxima in this data"
    want = (1 - keep_fraction) * values.size
    i = gaps[np.argmin(np.abs(gaps - want))]
    return float(np.sqrt(values[i] * values[i + 1]))


def plan_for(name, dtype):
    plan = fused_linear_cross_entropy_plan(BT, H, V, dtype, PLAN_BUDGETS[name])
    assert plan["plan"] == name
    return plan


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("plan_name", list(PLAN_BUDGETS))
def test_filtered_gradients_match_reference(dtype, plan_name):
    x, w, t = text_like(BT, H, V, dtype, seed=1)
    plan = plan_for(plan_name, dtype)
    g = softmax_grad(x, w, t)
    maxima = block_maxima(g, *grid(plan))
    eps = separated_eps(maxima, keep_fraction=0.3)
    gi_ref, gw_ref, active, total = filtered_reference(x, w, g, np.full(BT, 1.0 / BT), maxima, eps)
    assert 0 < active < total
    exact = tg.fused_linear_cross_entropy(x, w, t, memory_budget=PLAN_BUDGETS[plan_name])
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, memory_budget=PLAN_BUDGETS[plan_name], filter_eps=eps)
    assert tg.fused_linear_cross_entropy_filter_stats() == (active, total)
    assert loss.tobytes() == exact[0].tobytes()  # the loss is never filtered
    assert gi.dtype == dtype and gw.dtype == dtype
    assert rel_err(gi, gi_ref) < GRAD_TOL[dtype]
    assert rel_err(gw, gw_ref) < GRAD_TOL[dtype]
    # and the filter really changed something measurable on this data
    assert rel_err(gi, exact[1]) > 0 or rel_err(gw, exact[2]) > 0


def test_threshold_applies_to_the_unscaled_gradient():
    """Per-row upstream gradients (reduction none) and class weights scale G, not what is filtered."""
    x, w, t = text_like(BT, H, V, F32, seed=2)
    t[[3, 100, 101]] = -100
    rng = np.random.default_rng(3)
    go = rng.uniform(0.01, 100.0, BT).astype(np.float32)
    cw = rng.uniform(0.5, 2.0, V).astype(np.float32)
    plan = plan_for("whole", F32)
    g = softmax_grad(x, w, t)
    maxima = block_maxima(g, *grid(plan))
    eps = separated_eps(maxima, keep_fraction=0.25)
    valid = t != -100
    scale = np.where(valid, go * cw[np.where(valid, t, 0)], 0.0)
    gi_ref, gw_ref, active, total = filtered_reference(x, w, g, scale, maxima, eps)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, reduction="none", class_weight=cw, grad_output=go,
                                                 memory_budget=PLAN_BUDGETS["whole"], filter_eps=eps)
    assert tg.fused_linear_cross_entropy_filter_stats() == (active, total)
    assert rel_err(gi, gi_ref) < GRAD_TOL[F32]
    assert rel_err(gw, gw_ref) < GRAD_TOL[F32]


@pytest.mark.parametrize("plan_name", list(PLAN_BUDGETS))
def test_huge_threshold_drops_every_block_and_tiny_keeps_them(plan_name):
    x, w, t = text_like(BT, H, V, BF16, seed=4)
    budget = PLAN_BUDGETS[plan_name]
    exact = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget, filter_eps=1e30)
    active, total = tg.fused_linear_cross_entropy_filter_stats()
    assert active == 0 and total > 0
    assert loss.tobytes() == exact[0].tobytes()
    assert not np.any(f64(gi)) and not np.any(f64(gw))
    kept = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget, filter_eps=1e-38)
    active, total = tg.fused_linear_cross_entropy_filter_stats()
    assert active == total
    assert rel_err(kept[1], exact[1]) < 1e-6 and rel_err(kept[2], exact[2]) < 1e-6


def test_nan_is_never_filtered():
    x, w, t = text_like(BT, H, V, F32, seed=5)
    x[7, 3] = np.nan
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, filter_eps=1e30)
    assert tg.fused_linear_cross_entropy_filter_stats()[0] >= 1  # the NaN row's blocks stay
    assert np.isnan(gi[7]).all() and np.isnan(gw).any()


@pytest.mark.parametrize("mode", [{"filter_eps": 2.0 ** -12}, {"filter_tolerance": 0.3}], ids=["eps", "bounded"])
@pytest.mark.parametrize("plan_name", list(PLAN_BUDGETS))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_filtered_results_do_not_depend_on_threads(plan_name, dtype, mode, threads, monkeypatch):
    """Unbounded (filter_eps) and bounded (filter_tolerance, tests/test_fused_linear_cross_entropy_bound.py;
    every skip the bound allows, however few)."""
    monkeypatch.setenv("TILEGRAD_FLCE_FILTER_MIN_SKIP", "0")
    x, w, t = text_like(BT, H, V, dtype, seed=6)
    outs = []
    for n in (1, 2, 3):
        threads(n)
        r = tg.fused_linear_cross_entropy(x, w, t, memory_budget=PLAN_BUDGETS[plan_name], **mode)
        outs.append([a.tobytes() for a in r] + [tg.fused_linear_cross_entropy_filter_stats(detail=True)])
    assert outs[0] == outs[1] == outs[2]
    stats = outs[0][-1]
    assert stats["active"] < stats["total"] or stats["input_skipped"] > 0.0  # something was filtered


def test_threshold_of_each_argument():
    """A float is the per-entry threshold; "auto" is bounded filtering (tests/test_fused_linear_cross_entropy_bound.py),
    which has none."""
    assert filter_threshold(None, F32) == 0.0
    assert filter_threshold(0.25, BF16) == 0.25
    assert filter_threshold("auto", BF16) == 0.0
    with pytest.raises(TypeError, match="filter_eps"):
        filter_threshold("auto", np.dtype(np.int64))
    with pytest.raises(ValueError, match="filter_eps"):
        filter_threshold(-1.0, F32)
