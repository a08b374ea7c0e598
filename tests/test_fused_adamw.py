"""tg.fused_adamw / tg.apply_adam_w (aclnnFusedAdamw / aclnnApplyAdamWV2) against the float64
reference (tests/reference/adamw.py): dtypes and the vendor's mixes, amsgrad, maximize, step
convention, strides, gradScale / foundInf, clipping, master weights, thread-count independence and
bad input (never a partial update)."""

import numpy as np
import pytest

import tilegrad as tg
from reference.adamw import BF16, F16, F32, adamw_step, clip_coefficient

HP = dict(lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.05, eps=1e-8)


def _state(shape, dtype, seed, states=None):
    rng = np.random.default_rng(seed)
    states = dtype if states is None else states
    p = rng.standard_normal(shape).astype(dtype)
    g = (rng.standard_normal(shape) * 0.5).astype(dtype)
    m = (rng.standard_normal(shape) * 0.1).astype(states)
    v = (rng.random(shape) * 0.01).astype(states)
    mx = (v.astype(np.float64) * rng.choice([0.5, 2.0], shape)).astype(states)
    return p, g, m, v, mx


def _close32(actual, expected, ulps=4):
    """float32 results within a few ulps of the float64 reference, relative to the array's scale
    where the update cancels (m = lerp of nearly opposite values, p crossing zero)."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    np.testing.assert_allclose(actual, expected, rtol=ulps * 2.0 ** -23, atol=ulps * 2.0 ** -23 * scale)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("amsgrad,maximize,wd", [(False, False, 0.05), (True, False, 0.0), (True, True, 0.1),
                                                  (False, True, 0.0)])
def test_fused_matches_reference(isa, dtype, amsgrad, maximize, wd):
    shapes = [(300,), (17, 33), (5,), (2, 3, 4)]
    slots = [_state(s, dtype, i) for i, s in enumerate(shapes)]
    steps = [np.array(k, np.float32) for k in (0, 3, 10, 99)]
    hp = dict(HP, weight_decay=wd)
    ref = [adamw_step(p, g, m, v, mx, st, amsgrad=amsgrad, maximize=maximize, **hp)
           for (p, g, m, v, mx), st in zip(slots, steps)]
    ps, gs, ms, vs, mxs = (list(x) for x in zip(*slots))
    out = tg.fused_adamw(ps, gs, ms, vs, mxs if amsgrad else None, steps, amsgrad=amsgrad, maximize=maximize, **hp)
    assert out is None
    tol = 4 if dtype == F32 else 1
    for k, (p, g, m, v, mx) in enumerate(slots):
        rp, rm, rv, rmx = ref[k]
        got = [p, m, v] + ([mx] if amsgrad else [])
        exp = [rp, rm, rv] + ([rmx] if amsgrad else [])
        for a, e in zip(got, exp):
            scale = float(np.max(np.abs(e)))
            np.testing.assert_allclose(a.astype(np.float64), e, rtol=tol * {F32: 2.0 ** -23, F16: 2.0 ** -10,
                                                                           BF16: 2.0 ** -7}[dtype],
                                       atol=4e-7 * scale)


def test_step_convention_and_int64_steps(isa):
    """t = step + 1: step 0 is the first update (bias corrections 1 - beta^1); int64 steps too."""
    hp32 = {k: float(np.float32(x)) for k, x in HP.items()}  # the C ABI of ApplyAdamWV2 takes floats
    p, g, m, v, _ = _state((64,), F32, 7)
    rp, rm, rv, _ = adamw_step(p, g, m, v, None, 0, **hp32)
    p2, g2, m2, v2 = p.copy(), g.copy(), m.copy(), v.copy()
    tg.apply_adam_w(p, m, v, g, np.array([0], np.int64), **hp32)
    tg.fused_adamw([p2], [g2], [m2], [v2], None, [np.zeros((1, 1), np.float32)], **hp32)
    _close32(p, rp)
    _close32(m, rm)
    np.testing.assert_array_equal(p, p2)
    np.testing.assert_array_equal(m, m2)
    np.testing.assert_array_equal(v, v2)


MIXES = [  # var, m, v, grad (aclnnApplyAdamWV2 takes each dtype on its own)
    (F32, F32, F32, BF16), (F32, F32, F32, F16), (BF16, F32, F32, BF16), (F16, BF16, F32, F32), (BF16, BF16, BF16, F32)]


@pytest.mark.parametrize("mix", MIXES, ids=lambda m: "-".join(np.dtype(d).name for d in m))
@pytest.mark.parametrize("amsgrad", [False, True])
def test_apply_adam_w_dtype_mixes(isa, mix, amsgrad):
    dv, dm, dvv, dg = mix
    rng = np.random.default_rng(3)
    shape = (9, 21)
    p = rng.standard_normal(shape).astype(dv)
    g = rng.standard_normal(shape).astype(dg)
    m = (rng.standard_normal(shape) * 0.1).astype(dm)
    v = (rng.random(shape) * 0.01).astype(dvv)
    mx = (rng.random(shape) * 0.01).astype(dg)  # the vendor's mixed tuple keeps it in grad's dtype
    hp = {k: float(np.float32(x)) for k, x in HP.items()}
    rp, rm, rv, rmx = adamw_step(p, g, m, v, mx, 5, amsgrad=amsgrad, **hp)
    tg.apply_adam_w(p, m, v, g, np.array([5.0], np.float32), amsgrad=amsgrad, max_v=mx if amsgrad else None, **HP)
    for a, e, d in [(p, rp, dv), (m, rm, dm), (v, rv, dvv)] + ([(mx, rmx, dg)] if amsgrad else []):
        eps = {F32: 2.0 ** -23, F16: 2.0 ** -10, BF16: 2.0 ** -7}[np.dtype(d)]
        np.testing.assert_allclose(a.astype(np.float64), e, rtol=4 * eps, atol=4 * eps * float(np.max(np.abs(e))))


def test_strided_operands_equal_contiguous(isa):
    rng = np.random.default_rng(11)
    big = [rng.standard_normal((40, 60)).astype(np.float32) for _ in range(5)]
    views = [b.T[::2, ::-3] for b in big]  # non-contiguous, negative strides
    flat = [np.ascontiguousarray(x) for x in views]
    views[3][...] = np.abs(views[3]) * 0.01
    flat[3][...] = np.abs(flat[3]) * 0.01
    st = np.array(4.0, np.float32)
    tg.fused_adamw([views[0]], [views[1]], [views[2]], [views[3]], [views[4]], [st], amsgrad=True, **HP)
    tg.fused_adamw([flat[0]], [flat[1]], [flat[2]], [flat[3]], [flat[4]], [st], amsgrad=True, **HP)
    for a, b in zip(views, flat):
        np.testing.assert_array_equal(a, b)
    untouched = big[0].T[1::2]
    assert np.isfinite(untouched).all()


def _model(seed, dtype=F32):
    """A Llama-like mix of sizes: one large tensor, several matrices, small vectors."""
    rng = np.random.default_rng(seed)
    shapes = [(3000, 64), (64, 64), (7,), (64, 200), (64,), (1,), (129, 3)]
    return [tuple(x.astype(dtype) for x in (rng.standard_normal(s), rng.standard_normal(s) * 0.3,
                                              rng.standard_normal(s) * 0.01, rng.random(s) * 1e-3,
                                              rng.random(s) * 1e-3)) for s in shapes]


@pytest.mark.parametrize("clip", [None, 0.5, 1e9])
def test_threads_bit_identical(isa, threads, clip):
    results = []
    for n in (1, 2, 3):
        threads(n)
        slots = _model(5)
        ps, gs, ms, vs, mxs = (list(x) for x in zip(*slots))
        steps = [np.array(i, np.float32) for i in range(len(ps))]
        norm = tg.fused_adamw(ps, gs, ms, vs, mxs, steps, amsgrad=True, max_grad_norm=clip, **HP)
        results.append((norm, [np.concatenate([x.ravel() for x in (p, m, v, mx)]) for p, m, v, mx in
                               zip(ps, ms, vs, mxs)]))
    for norm, arrays in results[1:]:
        assert norm == results[0][0]
        for a, b in zip(arrays, results[0][1]):
            np.testing.assert_array_equal(a, b)


def test_grad_norm_same_on_every_isa():
    grads = [g for _, g, _, _, _ in _model(9)]
    previous = tg.max_isa()
    try:
        norms = set()
        for isa_name in ("scalar", "avx2", "avx512"):
            tg.set_max_isa(isa_name)
            norms.add(tg.adamw_grad_norm(grads))
    finally:
        tg.set_max_isa(previous)
    assert len(norms) == 1
    exact, _ = clip_coefficient(grads, 1.0)
    assert abs(norms.pop() - exact) <= 1e-7 * exact


@pytest.mark.parametrize("max_norm", [0.3, 1e6])
def test_clipping_matches_clip_then_adamw(isa, max_norm):
    slots = _model(2)
    grads = [g for _, g, _, _, _ in slots]
    norm, coef = clip_coefficient(grads, max_norm)
    steps = [np.array(2.0, np.float32)] * len(slots)
    ref = [adamw_step(p, g, m, v, None, 2, gmul=coef, **HP) for p, g, m, v, _ in slots]
    ps, gs, ms, vs, _ = (list(x) for x in zip(*slots))
    gs_before = [g.copy() for g in gs]
    got = tg.fused_adamw(ps, gs, ms, vs, None, steps, max_grad_norm=max_norm, **HP)
    assert abs(got - norm) <= 1e-7 * norm
    for g, g0 in zip(gs, gs_before):
        np.testing.assert_array_equal(g, g0)  # grads are read, not rescaled in place
    for (rp, rm, rv, _), p, m, v in zip(ref, ps, ms, vs):
        for a, e in ((p, rp), (m, rm), (v, rv)):
            np.testing.assert_allclose(a, e, rtol=8 * 2.0 ** -23, atol=1e-7 * float(np.max(np.abs(e))))


def test_precomputed_norm_equals_own(isa):
    a, b = _model(4), _model(4)
    lists_a = [list(x) for x in zip(*a)]
    lists_b = [list(x) for x in zip(*b)]
    steps = [np.array(1.0, np.float32)] * len(a)
    n = tg.adamw_grad_norm(lists_b[1])
    assert tg.fused_adamw(*lists_a[:4], None, steps, max_grad_norm=0.7, **HP) == n
    tg.fused_adamw(*lists_b[:4], None, steps, max_grad_norm=0.7, grad_norm=n, **HP)
    for x, y in zip(lists_a[0], lists_b[0]):
        np.testing.assert_array_equal(x, y)


def test_grad_scale_and_found_inf(isa):
    p, g, m, v, _ = _state((50,), F32, 1)
    ref = adamw_step(p, g, m, v, None, 1, gmul=float(np.float32(1) / np.float32(4.0)), **HP)
    st = np.array(1.0, np.float32)
    before = [x.copy() for x in (p, m, v)]
    tg.fused_adamw([p], [g], [m], [v], None, [st], grad_scale=np.array([4.0], np.float32),
                   found_inf=np.array([1.0], np.float32), **HP)
    for a, b in zip((p, m, v), before):
        np.testing.assert_array_equal(a, b)  # foundInf == 1.0: skipped entirely
    tg.fused_adamw([p], [g], [m], [v], None, [st], grad_scale=np.array([4.0], np.float32),
                   found_inf=np.array([0.0], np.float32), **HP)
    _close32(p, ref[0])
    _close32(m, ref[1])


@pytest.mark.parametrize("low", [BF16, F16], ids=["bf16", "fp16"])
def test_master_weights_round_once(isa, low):
    rng = np.random.default_rng(8)
    master = rng.standard_normal((1000,)).astype(np.float32)
    g = (rng.standard_normal(1000) * 0.1).astype(low)
    m = np.zeros(1000, np.float32)
    v = np.zeros(1000, np.float32)
    model = master.astype(low)
    st = np.array(0.0, np.float32)
    ref = adamw_step(master, g, m, v, None, 0, **HP)
    # The same step on float32 tensors (grad widened exactly) gives the master; the model copy is it rounded once.
    m32, v32, p32 = m.copy(), v.copy(), master.copy()
    tg.fused_adamw([p32], [g.astype(np.float32)], [m32], [v32], None, [st], **HP)
    tg.fused_adamw([master], [g], [m], [v], None, [st], model_params=[model], **HP)
    np.testing.assert_array_equal(master, p32)
    np.testing.assert_array_equal(model, p32.astype(low))
    _close32(master, ref[0])


def test_empty_tensors_skipped_steps_aligned():
    a = _state((0,), F32, 1)
    b = _state((30,), F32, 2)
    ref = adamw_step(*b[:4], None, 7, **HP)
    lists = [list(x) for x in zip(a, b)]
    tg.fused_adamw(*lists[:4], None, [np.array(0.0, np.float32), np.array(7.0, np.float32)], **HP)
    _close32(lists[0][1], ref[0])


# ---- bad input: an error, nothing written -----------------------------------------------------

def _lists(n=2, dtype=F32):
    slots = [_state((8,), dtype, i) for i in range(n)]
    return [list(x) for x in zip(*slots)], [np.array(1.0, np.float32) for _ in range(n)]


def _untouched(call):
    (ps, gs, ms, vs, mxs), steps = _lists()
    arrays = ps + ms + vs + mxs
    snapshot = [x.copy() for x in arrays]
    with pytest.raises((ValueError, TypeError)) as err:
        call(ps, gs, ms, vs, mxs, steps)
    for a, b in zip(arrays, snapshot):
        np.testing.assert_array_equal(a, b)
    return err.value


@pytest.mark.parametrize("mutate,match,code", [
    (lambda L, s: L[1].pop(), r"aclnnFusedAdamw: grads must hold one tensor per paramsRef tensor \(2\), got 1", 161002),
    (lambda L, s: L[2].__setitem__(1, np.zeros(9, np.float32)), r"expAvgsRef\[1\] shape \[9\]", 161002),
    (lambda L, s: L[1].__setitem__(0, L[1][0].astype(BF16)), r"grads\[0\] dtype bfloat16 != paramsRef\[0\]", 161002),
    (lambda L, s: s.__setitem__(1, np.array([-1.0], np.float32)), r"stateSteps\[1\] must be finite and >= 0.*got -1", 161002),
    (lambda L, s: s.__setitem__(1, np.array([1, 2], np.int64)), r"stateSteps\[1\] must have exactly one element", 161002),
    (lambda L, s: s.__setitem__(0, np.array(1, np.int32)), r"stateSteps\[0\] dtype", 161002),
    (lambda L, s: L[2].__setitem__(1, L[0][1]), r"must not overlap", 161002),
])
def test_bad_input_writes_nothing(mutate, match, code):
    def call(ps, gs, ms, vs, mxs, steps):
        mutate([ps, gs, ms, vs, mxs], steps)
        tg.fused_adamw(ps, gs, ms, vs, mxs, steps, amsgrad=True, **HP)
    err = _untouched(call)
    import re
    assert re.search(match, str(err)), str(err)
    assert err.code == code


def test_bad_hyper_parameters():
    (ps, gs, ms, vs, _), steps = _lists()
    with pytest.raises(ValueError, match=r"aclnnFusedAdamw: lr must be >= 0, got -1"):
        tg.fused_adamw(ps, gs, ms, vs, None, steps, lr=-1.0)
    with pytest.raises(ValueError, match=r"maxExpAvgSqsRef must be given when amsgrad is true"):
        tg.fused_adamw(ps, gs, ms, vs, None, steps, amsgrad=True)
    with pytest.raises(ValueError, match=r"paramsRef must hold at least one tensor"):
        tg.fused_adamw([], [], [], [], None, [])
    with pytest.raises(TypeError):
        tg.fused_adamw(ps, gs, ms, vs, None, steps, model_params=[None, None])


def test_apply_adam_w_errors():
    p, g, m, v, mx = _state((4, 4), F32, 0)
    with pytest.raises(ValueError, match=r"aclnnApplyAdamWV2: maxGradNormOptionalRef must be given when amsgrad"):
        tg.apply_adam_w(p, m, v, g, np.array(1.0, np.float32), amsgrad=True)
    with pytest.raises(ValueError, match=r"aclnnApplyAdamWV2: mRef shape \[4,3\] != varRef shape \[4,4\]"):
        tg.apply_adam_w(p, m[:, :3], v, g, np.array(1.0, np.float32))
    with pytest.raises(ValueError, match=r"aclnnApplyAdamWV2: grad dtype must be one of \{float32, float16, bfloat16\}, got float64"):
        tg.apply_adam_w(p, m, v, g.astype(np.float64), np.array(1.0, np.float32))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_every_isa_gives_the_same_bits(dtype):
    previous = tg.max_isa()
    results = []
    try:
        for isa_name in ("scalar", "avx2", "avx512"):
            tg.set_max_isa(isa_name)
            slots = _model(6, dtype)
            ps, gs, ms, vs, mxs = (list(x) for x in zip(*slots))
            steps = [np.array(3.0, np.float32)] * len(ps)
            tg.fused_adamw(ps, gs, ms, vs, mxs, steps, amsgrad=True, maximize=True, **HP)
            results.append([np.concatenate([x.ravel().view(np.uint8) for x in (p, m, v, mx)])
                            for p, m, v, mx in zip(ps, ms, vs, mxs)])
    finally:
        tg.set_max_isa(previous)
    for other in results[1:]:
        for a, b in zip(other, results[0]):
            np.testing.assert_array_equal(a, b)
