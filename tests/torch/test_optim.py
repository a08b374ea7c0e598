"""tilegrad.torch.optim.AdamW against torch.optim.AdamW: 100-step trajectories (fp32 within a few
ulps, float64 and complex128 to the bit), param groups, tensor lr, schedulers, missing / sparse
grads, state_dict both ways (float64 steps included), clipping equal to clip_grad_norm_ + AdamW over
every group (non-finite norms included), master weights against an fp32 run (params changed outside
the optimizer, resuming in either load order), copies, torch's fused AMP inputs and argument checks,
repeated params, thread-count independence. PyTorch's own optimizer test suite, class swapped, is in
test_optim_torch_suite.py."""

import copy
import math
import pickle
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tilegrad.torch as tgt  # noqa: E402

ULP = 2.0 ** -23
SHAPES = [(300, 17), (64,), (3,), (5, 7, 2)]


def _params(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in SHAPES]


def _grads(step, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 + step)
    return [(torch.randn(s, generator=g) * (step % 5 + 0.1)).to(dtype) for s in SHAPES]


def _train(opt_cls, params, groups_fn, steps=100, drop=None, clip=None, **kw):
    opt = opt_cls(groups_fn(params), **kw)
    for t in range(steps):
        for i, (p, g) in enumerate(zip(params, _grads(t, params[0].dtype))):
            p.grad = None if drop and drop(t, i) else g.clone()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    return opt


def _assert_few_ulps(ours, theirs, ulps=8):
    for a, b in zip(ours, theirs):
        a, b = a.detach().double(), b.detach().double()
        scale = max(1.0, float(b.abs().max()))
        assert float((a - b).abs().max()) <= ulps * ULP * scale, float((a - b).abs().max())


def _one_group(ps):
    return ps


def _two_groups(ps):
    return [{"params": ps[:2]}, {"params": ps[2:], "lr": 3e-3, "weight_decay": 0.0, "betas": (0.8, 0.99)}]


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_trajectory_equals_torch(one_torch_thread, amsgrad, maximize, weight_decay):
    kw = dict(lr=1e-2, amsgrad=amsgrad, maximize=maximize, weight_decay=weight_decay)
    a, b = _params(), _params()
    _train(torch.optim.AdamW, a, _one_group, **kw)
    _train(tgt.optim.AdamW, b, _one_group, **kw)
    _assert_few_ulps(b, a)


def test_groups_tensor_lr_scheduler_missing_grads(one_torch_thread):
    def run(cls, ps):
        opt = cls(_two_groups(ps), lr=torch.tensor(2e-2), weight_decay=0.05)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=100)
        for t in range(100):
            for i, (p, g) in enumerate(zip(ps, _grads(t))):
                p.grad = None if (t % 7 == 3 and i == 1) or (t < 5 and i == 3) else g
            opt.step()
            sched.step()
        return opt
    a, b = _params(), _params()
    oa, ob = run(torch.optim.AdamW, a), run(tgt.optim.AdamW, b)
    _assert_few_ulps(b, a, ulps=16)  # torch computes a tensor lr's terms in float32, we in float64
    for p, q in zip(a, b):
        assert float(oa.state[p]["step"]) == float(ob.state[q]["step"])


def test_state_dict_round_trips_both_ways(one_torch_thread):
    a, b = _params(), _params()
    oa = _train(torch.optim.AdamW, a, _two_groups, steps=10, lr=1e-2, amsgrad=True)
    ob = _train(tgt.optim.AdamW, b, _two_groups, steps=10, lr=1e-2, amsgrad=True)
    sa, sb = oa.state_dict(), ob.state_dict()
    assert sa["state"].keys() == sb["state"].keys()
    for k in sa["state"]:
        assert sa["state"][k].keys() == sb["state"][k].keys()
        assert sb["state"][k]["step"].dtype == torch.float32 and sb["state"][k]["step"].dim() == 0
    assert [set(g) for g in sa["param_groups"]] == [set(g) for g in sb["param_groups"]]
    # torch continues from ours and ours from torch's: both end where an uninterrupted run ends.
    c, d = [p.detach().clone().requires_grad_() for p in b], [p.detach().clone().requires_grad_() for p in a]
    oc = torch.optim.AdamW(_two_groups(c), lr=1e-2, amsgrad=True)
    oc.load_state_dict(copy.deepcopy(sb))
    od = tgt.optim.AdamW(_two_groups(d), lr=1e-2, amsgrad=True)
    od.load_state_dict(copy.deepcopy(sa))
    for t in range(10, 20):
        for x, y, g in zip(c, d, _grads(t)):
            x.grad, y.grad = g.clone(), g.clone()
        oc.step()
        od.step()
    ref = _params()
    _train(torch.optim.AdamW, ref, _two_groups, steps=20, lr=1e-2, amsgrad=True)
    _assert_few_ulps(c, ref)
    _assert_few_ulps(d, ref)


def test_clipping_equals_clip_grad_norm_then_adamw(one_torch_thread):
    a, b = _params(), _params()
    _train(torch.optim.AdamW, a, _two_groups, clip=1.0, lr=1e-2)
    ob = _train(tgt.optim.AdamW, b, _two_groups, lr=1e-2, max_grad_norm=1.0)
    _assert_few_ulps(b, a, ulps=16)
    last = _grads(99)
    expected = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double()) for g in last])))
    assert abs(ob.last_grad_norm - expected) <= 1e-7 * expected


def test_bf16_master_weights_follow_fp32(one_torch_thread):
    """bf16 params with fp32 masters stay within bf16 rounding of the fp32 run; torch's bf16 AdamW
    (moments in bf16, every update rounded into the param) drifts further."""
    ours, theirs = _params(torch.bfloat16), _params(torch.bfloat16)
    ref = [torch.nn.Parameter(p.detach().float()) for p in ours]  # fp32 run from the same bf16 values and grads
    kw = dict(lr=1e-3, weight_decay=0.1)

    def run(cls, ps, **extra):
        opt = cls(ps, **kw, **extra)
        for t in range(100):
            for p, g in zip(ps, _grads(t)):
                p.grad = g.to(torch.bfloat16).to(p.dtype)
            opt.step()
        return opt
    run(torch.optim.AdamW, ref)
    opt = run(tgt.optim.AdamW, ours, master_weights=True)
    run(torch.optim.AdamW, theirs)
    for r, o, t in zip(ref, ours, theirs):
        master = opt.state[o]["master_param"]
        assert master.dtype == torch.float32 and opt.state[o]["exp_avg"].dtype == torch.float32
        torch.testing.assert_close(o.detach(), master.to(torch.bfloat16), rtol=0, atol=0)  # rounded once
        err_ours = float((master.double() - r.detach().double()).abs().max())
        err_torch = float((t.detach().double() - r.detach().double()).abs().max())
        assert err_ours <= 1e-5 and err_ours < err_torch / 10


def test_threads_bit_identical(torch_threads):
    results = []
    for n in (1, 2, 3):
        torch_threads(n)
        ps = [torch.nn.Parameter(torch.randn(256, 300, generator=torch.Generator().manual_seed(i))) for i in range(3)]
        opt = tgt.optim.AdamW(ps, lr=1e-2, max_grad_norm=0.5, amsgrad=True)
        for t in range(3):
            for i, p in enumerate(ps):
                p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(100 * t + i))
            opt.step()
        results.append(([p.detach().clone() for p in ps], opt.last_grad_norm))
    for ps, norm in results[1:]:
        assert norm == results[0][1]
        for p, q in zip(ps, results[0][0]):
            assert torch.equal(p, q)


def test_refusals():
    p = torch.nn.Parameter(torch.randn(4))
    with pytest.raises(ValueError, match="capturable must be False"):
        tgt.optim.AdamW([p], capturable=True)
    with pytest.raises(ValueError, match="differentiable must be False"):
        tgt.optim.AdamW([p], differentiable=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tgt.optim.AdamW([p], lr=-1.0)
    tgt.optim.AdamW([p], foreach=True)  # accepted: one fused path on the CPU either way
    tgt.optim.AdamW([p], fused=True)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="does not support sparse gradients"):
        tgt.optim.AdamW(emb.parameters()).step()
    q = torch.nn.Parameter(torch.randn(4))
    q.grad = torch.randn(4)
    opt = tgt.optim.AdamW([q], lr=-0.0)
    opt.param_groups[0]["lr"] = -1.0
    before = q.detach().clone()
    with pytest.raises(ValueError, match="lr must be >= 0"):
        opt.step()
    assert torch.equal(q.detach(), before) and len(opt.state[q]) == 0  # checked before any state exists


def test_master_weights_state_dict(one_torch_thread):
    ps = _params(torch.bfloat16)
    opt = tgt.optim.AdamW(ps, lr=1e-3, master_weights=True)
    for p, g in zip(ps, _grads(0)):
        p.grad = g.to(torch.bfloat16)
    opt.step()
    sd = copy.deepcopy(opt.state_dict())
    assert sd["state"][0]["exp_avg"].dtype == torch.float32 and "master_param" in sd["state"][0]
    again = tgt.optim.AdamW([p.detach().clone().requires_grad_() for p in ps], lr=1e-3, master_weights=True)
    again.load_state_dict(sd)  # float32 moments and masters survive torch's cast to the param dtype
    for p, q in zip(opt.param_groups[0]["params"], again.param_groups[0]["params"]):
        for key in ("exp_avg", "exp_avg_sq", "master_param"):
            assert torch.equal(opt.state[p][key], again.state[q][key])
    theirs = torch.optim.AdamW([p.detach().clone().requires_grad_() for p in ps], lr=1e-3)
    theirs.load_state_dict(copy.deepcopy(sd))  # torch takes it, with moments cast to bfloat16
    assert theirs.state_dict()["state"][0]["exp_avg"].dtype == torch.bfloat16


def _step_both(pairs, grads, dtype=None):
    """Gives each (torch param, tilegrad param) pair the same grad, then steps nothing (callers do)."""
    for (a, b), g in zip(pairs, grads):
        g = g if dtype is None else g.to(dtype)
        a.grad, b.grad = g.clone(), g.clone()


def test_master_weights_take_a_change_made_outside(one_torch_thread):
    """p.clamp_ between steps: the clamped elements' next update starts from the clamped 16-bit value
    (their master re-seeded from it), as an fp32 torch.optim.AdamW run given the same values does."""
    ours = _params(torch.bfloat16)
    ref = [torch.nn.Parameter(p.detach().float()) for p in ours]
    opt = tgt.optim.AdamW(ours, lr=1e-2, master_weights=True)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2)
    for t in range(6):
        for p, r, g in zip(ours, ref, _grads(t)):
            p.grad = g.to(torch.bfloat16)
            r.grad = p.grad.float()
        opt.step()
        ref_opt.step()
        if t == 2:
            with torch.no_grad():
                for p, r in zip(ours, ref):
                    before = p.clone()
                    p.clamp_(max=0.5)
                    r.copy_(torch.where(p != before, p.float(), r))  # the clamped elements restart there
    for p, r in zip(ours, ref):
        master = opt.state[p]["master_param"]
        _assert_few_ulps([master], [r])
        assert torch.equal(p.detach(), master.to(torch.bfloat16))


def _bf16_checkpoint(saved_by):
    """Five steps of bf16 params by tilegrad (master weights) or torch: (param values, optimizer state dict)."""
    ps = _params(torch.bfloat16)
    opt = tgt.optim.AdamW(ps, lr=1e-2, master_weights=True) if saved_by == "tilegrad" else torch.optim.AdamW(ps, lr=1e-2)
    for t in range(5):
        for p, g in zip(ps, _grads(t)):
            p.grad = g.to(torch.bfloat16)
        opt.step()
    return [p.detach().clone() for p in ps], copy.deepcopy(opt.state_dict())


@pytest.mark.parametrize("saved_by", ["tilegrad", "torch"])
@pytest.mark.parametrize("optimizer_first", [True, False])
def test_master_weights_resume_in_either_load_order(one_torch_thread, saved_by, optimizer_first):
    """Resuming bf16 training with master weights: loading the optimizer before or after the model
    continues where an fp32 torch.optim.AdamW resumed from the same checkpoint goes (never from the
    fresh model's initial weights)."""
    values, sd = _bf16_checkpoint(saved_by)
    fresh = _params(torch.bfloat16, seed=7)
    opt = tgt.optim.AdamW(fresh, lr=1e-2, master_weights=True)

    def load_model():
        with torch.no_grad():
            for p, v in zip(fresh, values):
                p.copy_(v)  # what model.load_state_dict does
    if not optimizer_first:
        load_model()
    opt.load_state_dict(copy.deepcopy(sd))
    if optimizer_first:
        load_model()
    start = [s["master_param"] for s in sd["state"].values()] if saved_by == "tilegrad" else values
    ref = [torch.nn.Parameter(v.detach().float().clone()) for v in start]
    ref_opt = torch.optim.AdamW(ref, lr=1e-2)
    ref_opt.load_state_dict(copy.deepcopy(sd))  # moments cast to float32 (the params' dtype)
    for t in range(5, 10):
        for p, r, g in zip(fresh, ref, _grads(t)):
            p.grad = g.to(torch.bfloat16)
            r.grad = p.grad.float()
        opt.step()
        ref_opt.step()
    for p, r in zip(fresh, ref):
        _assert_few_ulps([opt.state[p]["master_param"]], [r])


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_clipping_uses_one_norm_over_every_group_when_it_is_not_finite(one_torch_thread, bad):
    """One grad element NaN (or inf) in the second group: clip_grad_norm_ over all params, then AdamW,
    gives every param NaN (or a zero-grad step, NaN where the inf was); so does max_grad_norm."""
    a, b = _params(), _params()
    grads = _grads(0)
    grads[3][1, 2, 0] = bad
    _step_both(zip(a, b), grads)
    torch.nn.utils.clip_grad_norm_(a, 1.0)
    torch.optim.AdamW(_two_groups(a), lr=1e-2).step()
    ob = tgt.optim.AdamW(_two_groups(b), lr=1e-2, max_grad_norm=1.0)
    ob.step()
    assert math.isnan(ob.last_grad_norm) if bad != bad else ob.last_grad_norm == math.inf
    for x, y in zip(a, b):
        torch.testing.assert_close(y.detach(), x.detach(), rtol=4 * ULP, atol=0, equal_nan=True)
    assert bool(torch.isnan(b[0]).all()) == (bad != bad)


def test_clipping_uses_one_norm_over_groups_of_every_dtype(one_torch_thread):
    """Groups of float32, float64 and complex64 params: one global norm, as clip_grad_norm_ + AdamW."""
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.nn.Parameter(torch.randn(40, 3, generator=g)),
                torch.nn.Parameter(torch.randn(17, generator=g, dtype=torch.float64)),
                torch.nn.Parameter(torch.randn(9, generator=g, dtype=torch.complex64))]
    a, b = make(0), make(0)
    groups = lambda ps: [{"params": ps[:1]}, {"params": ps[1:2], "lr": 3e-3}, {"params": ps[2:]}]  # noqa: E731
    oa = torch.optim.AdamW(groups(a), lr=1e-2)
    ob = tgt.optim.AdamW(groups(b), lr=1e-2, max_grad_norm=0.5)
    for t in range(20):
        g = torch.Generator().manual_seed(50 + t)
        _step_both(zip(a, b), [3 * torch.randn(p.shape, generator=g, dtype=p.dtype) for p in a])
        torch.nn.utils.clip_grad_norm_(a, 0.5)
        oa.step()
        ob.step()
    for x, y in zip(a, b):
        torch.testing.assert_close(torch.view_as_real(y.detach()) if y.is_complex() else y.detach(),
                                   torch.view_as_real(x.detach()) if x.is_complex() else x.detach(),
                                   rtol=16 * ULP, atol=16 * ULP)


def _train_pair(kw_ours, kw_theirs, make_params, steps=30, clip=None):
    a, b = make_params(), make_params()
    oa = torch.optim.AdamW(_two_groups(a), **kw_theirs)
    ob = tgt.optim.AdamW(_two_groups(b), **kw_ours, **({} if clip is None else {"max_grad_norm": clip}))
    for t in range(steps):
        _step_both(zip(a, b), _grads(t, a[0].dtype))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(a, clip)
        oa.step()
        ob.step()
    return a, b, oa, ob


FLOAT64_CONFIGS = {
    "default": {},
    "amsgrad+wd": dict(lr=1e-2, amsgrad=True, weight_decay=0.1),
    "maximize": dict(lr=1e-2, maximize=True),
    "tensor lr": dict(lr=torch.tensor(1e-2)),
    "tensor lr and betas": dict(lr=torch.tensor([3e-3]), betas=(torch.tensor(0.8), torch.tensor([0.95]))),
}


@pytest.mark.parametrize("name", FLOAT64_CONFIGS)
def test_float64_params_step_as_torch_to_the_bit(one_torch_thread, name):
    kw = FLOAT64_CONFIGS[name]
    a, b, oa, ob = _train_pair(kw, kw, lambda: _params(torch.float64))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    for p, q in zip(a, b):
        for key, value in oa.state[p].items():
            assert torch.equal(ob.state[q][key].to(value.dtype), value), key


def test_float64_fused_and_clipped_match_torch(one_torch_thread):
    """fused=True: torch's fused float64 CPU kernel rounds differently from its for-loop, which ours
    follows; max_grad_norm: clip_grad_norm_ sums the norm in another order. Both within 1e-14."""
    a, b, _, _ = _train_pair(dict(fused=True, lr=1e-2), dict(fused=True, lr=1e-2), lambda: _params(torch.float64))
    c, d, _, _ = _train_pair(dict(lr=1e-2), dict(lr=1e-2), lambda: _params(torch.float64), clip=1.0)
    for x, y in zip(a + c, b + d):
        torch.testing.assert_close(y.detach(), x.detach(), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_params_step_as_torch(one_torch_thread, dtype):
    """Complex params step as their view_as_real views (torch's rule): complex64 within a few ulps of
    torch, complex128 to the bit."""
    def make():
        g = torch.Generator().manual_seed(3)
        return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype)) for s in SHAPES]
    kw = dict(lr=1e-2, amsgrad=True, weight_decay=0.1)
    a, b, oa, ob = _train_pair(kw, kw, make)
    if dtype == torch.complex128:
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    _assert_few_ulps([torch.view_as_real(y) for y in b], [torch.view_as_real(x) for x in a])
    assert ob.state[b[0]]["exp_avg"].dtype == dtype


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))], ids=["deepcopy", "pickle"])
def test_copies_keep_max_grad_norm_and_master_weights(one_torch_thread, copier):
    """A deepcopy / pickle round trip keeps the extensions: the copy steps on, clipped, as
    clip_grad_norm_ + torch.optim.AdamW over the whole run; a master-weights copy keeps its masters."""
    a, b = _params(), _params()
    oa = torch.optim.AdamW(_two_groups(a), lr=1e-2)
    ob = tgt.optim.AdamW(_two_groups(b), lr=1e-2, max_grad_norm=1.0)
    for t in range(6):
        if t == 3:
            ob = copier(ob)
            b = [p for g in ob.param_groups for p in g["params"]]
            assert (ob.max_grad_norm, ob.master_weights) == (1.0, False) and ob.last_grad_norm is not None
        _step_both(zip(a, b), _grads(t))
        torch.nn.utils.clip_grad_norm_(a, 1.0)
        oa.step()
        ob.step()
    _assert_few_ulps(b, a, ulps=16)
    ps = _params(torch.bfloat16)
    om = tgt.optim.AdamW(ps, master_weights=True)
    for p, g in zip(ps, _grads(0)):
        p.grad = g.to(torch.bfloat16)
    om.step()
    twin = copier(om)
    assert twin.master_weights and all(s["master_param"].dtype == torch.float32 for s in twin.state.values())


def test_fused_honours_grad_scale_and_found_inf_like_torch(one_torch_thread):
    """fused=True with grad_scale / found_inf set on the optimizer (torch.amp.GradScaler's protocol):
    grads divided by the scale in place and the step taken; found_inf == 1 skips it (nothing written,
    steps unchanged): the same params, grads and steps as torch's fused AdamW."""
    a, b = _params(), _params()
    oa = torch.optim.AdamW(_two_groups(a), lr=1e-2, fused=True)
    ob = tgt.optim.AdamW(_two_groups(b), lr=1e-2, fused=True)
    assert ob._step_supports_amp_scaling == oa._step_supports_amp_scaling
    for t, found in enumerate([0.0, 1.0, 0.0]):
        _step_both(zip(a, b), [g * 64 for g in _grads(t)])
        for opt in (oa, ob):
            opt.grad_scale, opt.found_inf = torch.tensor([64.0]), torch.tensor(found)
        before = [p.detach().clone() for p in b]
        oa.step()
        ob.step()
        for x, y in zip(a, b):
            assert torch.equal(y.grad, x.grad)  # unscaled in place, or untouched when skipped
        if found:
            assert all(torch.equal(p, q) for p, q in zip(b, before))
    _assert_few_ulps(b, a)
    assert [float(ob.state[p]["step"]) for p in b] == [float(oa.state[p]["step"]) for p in a] == [2.0] * 4


def test_fused_with_grad_scaler_follows_torch(one_torch_thread):
    """torch.amp.GradScaler on the CPU driving fused=True AdamW, an inf grad on one step: ours and
    torch's skip the same step and end at the same params."""
    def run(cls):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
        opt = cls(model.parameters(), lr=1e-2, fused=True)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
        for t in range(6):
            opt.zero_grad()
            scaler.scale(model(x).square().mean()).backward()
            if t == 2:
                model[0].weight.grad[0, 0] = float("inf")
            scaler.step(opt)
            scaler.update()
        return list(model.parameters()), scaler.get_scale()
    theirs, scale_theirs = run(torch.optim.AdamW)
    ours, scale_ours = run(tgt.optim.AdamW)
    assert scale_ours == scale_theirs
    _assert_few_ulps(ours, theirs, ulps=64)


def test_fused_meta_params_raise_like_torch():
    with torch.device("meta"):
        model = torch.nn.Linear(2, 3)
    for cls in (torch.optim.AdamW, tgt.optim.AdamW):
        opt = cls(model.parameters(), fused=True)
        with torch.device("meta"):
            for p in model.parameters():
                p.grad = torch.rand_like(p)
        with pytest.raises(RuntimeError, match="`fused=True` requires all the params to be floating point Tensors"):
            opt.step()


@pytest.mark.parametrize("kwargs", [
    dict(betas=(0.9, torch.tensor(0.99))), dict(betas=(torch.tensor(0.9), 0.99)),
    dict(lr=torch.tensor(1e-3), foreach=True), dict(betas=(torch.tensor(0.9), torch.tensor(0.99)), foreach=True),
    dict(lr=torch.tensor([1e-3, 1e-3])), dict(lr=-1.0), dict(eps=-1.0), dict(betas=(1.0, 0.0)),
    dict(betas=(0.5, 1.0)), dict(weight_decay=-1.0), dict(foreach=True, fused=True),
], ids=lambda kw: ",".join(kw))
def test_constructor_checks_match_torch(kwargs):
    """Each bad argument raises what torch.optim.AdamW raises: same type, torch's message inside ours."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.randn(2))], **kwargs)
    except Exception as error:  # noqa: BLE001 - whatever torch raises is the reference
        theirs = error
    else:
        pytest.skip(f"torch {torch.__version__} accepts {kwargs} (its check came in a later release)")
    with pytest.raises(type(theirs), match=re.escape(str(theirs))):
        tgt.optim.AdamW([torch.nn.Parameter(torch.randn(2))], **kwargs)


def test_loads_torch_state_dict_with_float64_steps(one_torch_thread):
    """A torch state dict whose steps are float64 tensors (torch makes them so under a float64 default
    dtype) loads and steps on as torch does."""
    a = _params()
    oa = _train(torch.optim.AdamW, a, _two_groups, steps=3, lr=1e-2)
    sd = copy.deepcopy(oa.state_dict())
    for s in sd["state"].values():
        s["step"] = s["step"].to(torch.float64)
    c, d = [p.detach().clone().requires_grad_() for p in a], [p.detach().clone().requires_grad_() for p in a]
    oc, od = torch.optim.AdamW(_two_groups(c), lr=1e-2), tgt.optim.AdamW(_two_groups(d), lr=1e-2)
    oc.load_state_dict(copy.deepcopy(sd))
    od.load_state_dict(copy.deepcopy(sd))
    for t in range(3, 6):
        _step_both(zip(c, d), _grads(t))
        oc.step()
        od.step()
    _assert_few_ulps(d, c)
    assert [float(od.state[p]["step"]) for p in d] == [float(oc.state[p]["step"]) for p in c] == [6.0] * 4


def test_param_listed_twice_steps_twice_like_torch(one_torch_thread):
    """torch warns about a group listing a param twice and steps it once per listing; so do we."""
    a, b = _params(), _params()
    with pytest.warns(UserWarning, match="duplicate parameters"):
        oa = torch.optim.AdamW([a[0], a[1], a[0]], lr=1e-2, amsgrad=True)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ob = tgt.optim.AdamW([b[0], b[1], b[0]], lr=1e-2, amsgrad=True, max_grad_norm=5.0)
    for t in range(5):
        _step_both(zip(a, b), _grads(t)[:2])
        torch.nn.utils.clip_grad_norm_(a[:2], 5.0)
        oa.step()
        ob.step()
    _assert_few_ulps(b[:2], a[:2], ulps=16)
    assert [float(ob.state[p]["step"]) for p in b[:2]] == [float(oa.state[p]["step"]) for p in a[:2]] == [10.0, 5.0]
