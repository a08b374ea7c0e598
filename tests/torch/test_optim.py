"""tilegrad.torch.optim.AdamW against torch.optim.AdamW: 100-step trajectories (fp32 within a few
ulps), param groups, tensor lr, schedulers, missing / sparse grads, state_dict both ways, clipping
equal to clip_grad_norm_ + AdamW, master weights against an fp32 run, thread-count independence."""

import copy

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
    tgt.optim.AdamW([p], foreach=True, fused=True)  # accepted: one path on the CPU
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
    assert torch.equal(q.detach(), before) and float(opt.state[q]["step"]) == 0.0


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
