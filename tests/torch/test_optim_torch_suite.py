"""tilegrad.torch.optim.AdamW through what PyTorch's own test/test_optim.py checks on the CPU.

Driven by the installed torch's ``optim_db`` entry for AdamW (torch.testing._internal.common_optimizers:
its ``optim_inputs_func`` configurations with torch's foreach / fused variants, its error inputs, its
``scheduler_inputs``, ``not_og_supported_flags`` and ``supported_impls``); every test runs
torch.optim.AdamW and tilegrad's AdamW on the same inputs and compares what they do: trajectories
(float32 within a few ulps per step, float64 to the bit against torch's for-loop), states, errors
(type and torch's message), warnings, state dicts both ways, hooks, copies, schedulers.

Not covered, as in upstream's CPU run: its CUDA-only tests (multi-GPU, CUDA state dicts, peak memory,
fused CPU against CUDA, capturable configurations). ``differentiable=True`` (autograd through the
step), which upstream's configurations include, is refused by tilegrad with a ValueError (tested
last). The fused meta-tensor check, the found_inf skip and float64 / complex params are also in
test_optim.py.
"""

import copy
import functools
import pickle
import tempfile

import pytest

torch = pytest.importorskip("torch")
import tilegrad.torch as tgt  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook  # noqa: E402
from torch.testing._internal import common_optimizers as co  # noqa: E402

INFO = next(info for info in co.optim_db if info.optim_cls is torch.optim.AdamW)
CLASSES = (torch.optim.AdamW, tgt.optim.AdamW)
# One float32 step of ours and torch's differ by a few ulps; losses that follow the params amplify it.
FP32 = dict(rtol=1e-5, atol=1e-6)
# torch's own tolerance for its fused kernels against its for-loop in 16 bits (optim_db's override).
LOW_PRECISION = dict(rtol=5e-3, atol=5e-3)


def _configs(dtype=torch.float32):
    """Upstream's configurations on the CPU: each optim_inputs_func input, plain and with each of
    torch's implementation flags (foreach / fused) set, differentiable left out (refused here)."""
    inputs = co._get_optim_inputs_including_global_cliquey_kwargs("cpu", dtype, INFO, skip=("differentiable",))
    return [pytest.param(oi.kwargs, id=oi.desc.replace(" ", "_")) for oi in inputs]


CONFIGS = _configs()


def _both(kwargs, make_params, torch_kwargs=None):
    """torch's AdamW (with ``torch_kwargs`` if given) and ours over two identical sets of params:
    [(optimizer, params)] per class."""
    out = []
    for cls, kw in zip(CLASSES, (kwargs if torch_kwargs is None else torch_kwargs, kwargs)):
        params = make_params()
        out.append((cls(params, **copy.deepcopy(kw)), params))
    return out


def _linear_params(contiguous=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    if contiguous:
        return [torch.nn.Parameter(torch.randn(10, 5, generator=g)), torch.nn.Parameter(torch.randn(10, generator=g))]
    return [torch.nn.Parameter(torch.randn(10, 5, 2, generator=g)[..., 0]),
            torch.nn.Parameter(torch.randn(10, 2, generator=g)[..., 0])]


def _linear_loss(params, x):
    weight, bias = params
    return (weight.mv(x) + bias).pow(2).sum()


def _plain(params):
    """Param groups' tensors (from a list of Parameters or of group dicts)."""
    return [p for item in params for p in (item["params"] if isinstance(item, dict) else [item])]


def _assert_params_close(ours, theirs, **tol):
    for a, b in zip(_plain(ours), _plain(theirs)):
        torch.testing.assert_close(a.detach(), b.detach(), **(tol or FP32))


def _assert_states_close(ours_opt, ours, theirs_opt, theirs, **tol):
    for p, q in zip(_plain(ours), _plain(theirs)):
        mine, ref = ours_opt.state[p], theirs_opt.state[q]
        assert mine.keys() == ref.keys()
        for key in ref:
            torch.testing.assert_close(mine[key], ref[key], **(tol or FP32))


def _step_with_loss(opt, params, x):
    opt.zero_grad()
    loss = _linear_loss(params, x)
    loss.backward()
    opt.step()
    return loss.detach()


@pytest.mark.parametrize("error", INFO.optim_error_inputs_func(device="cpu", dtype=torch.float32),
                         ids=lambda e: e.optimizer_error_input.desc.replace(" ", "_"))
def test_error_inputs_raise_what_torch_raises(error):
    """optim_db's error inputs: the same exception or warning type and torch's message pattern, on
    construction or at the first step, from both classes."""
    oi = error.optimizer_error_input
    for cls in CLASSES:
        expect = pytest.warns if issubclass(error.error_type, Warning) else pytest.raises
        if error.error_on == co.OptimizerErrorEnum.CONSTRUCTION_ERROR:
            with expect(error.error_type, match=error.error_regex):
                cls(oi.params, **oi.kwargs)
        else:
            opt = cls(oi.params, **oi.kwargs)
            with expect(error.error_type, match=error.error_regex):
                opt.step()


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("schedulers", [0, 1], ids=["no_scheduler", "optim_db_schedulers"])
def test_twenty_steps_follow_torch(one_torch_thread, kwargs, contiguous, schedulers):
    """Upstream's goes-right-direction test, compared: 20 closure steps (optim_db's LR schedulers
    stepped after each, ReduceLROnPlateau on the loss) give the losses and params of torch's for-loop
    AdamW (upstream forces it here; torch's fused CPU kernel also steps non-contiguous params wrong),
    and the loss moves the right way."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(1))
    runs = []
    for opt, params in _both(kwargs, lambda: _linear_params(contiguous), {**kwargs, "fused": False}):
        scheds = [make(opt) for make in (INFO.scheduler_inputs[0] if schedulers else [])]
        losses = []
        for _ in range(20):
            losses.append(opt.step(functools.partial(_closure, opt, params, x)))
            for s in scheds:
                s.step(losses[-1].detach()) if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau) else s.step()
        losses.append(_closure(opt, params, x))
        runs.append((params, torch.stack(losses).detach()))
    (theirs, loss_theirs), (ours, loss_ours) = runs
    torch.testing.assert_close(loss_ours, loss_theirs, **FP32)
    _assert_params_close(ours, theirs)
    assert (loss_ours[-1] > loss_ours[0]) if kwargs.get("maximize") else (loss_ours[-1] < loss_ours[0])


def _closure(opt, params, x):
    opt.zero_grad()
    loss = _linear_loss(params, x)
    loss.backward()
    return loss


def _groups_without_weight_decay(ps, kwargs):
    return [dict(params=[ps[0]], **kwargs), dict(params=[ps[1]], **{**kwargs, "weight_decay": 0.0})], {}


def _groups_next_to_a_frozen_lr(ps, kwargs):
    return [dict(params=ps[:2], **{**kwargs, "lr": kwargs.get("lr", 1e-3)}), dict(params=[ps[2]])], {"lr": 1e-28}


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("layout", [_groups_without_weight_decay, _groups_next_to_a_frozen_lr],
                         ids=["weight_decay_groups", "lr_groups"])
def test_param_groups_follow_torch(one_torch_thread, kwargs, layout):
    """Upstream's param-group tests: a group without weight decay next to the configured one, and a
    configured group next to one at lr 1e-28 (whose param must not move): torch's params and states
    after 20 steps."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(2))
    runs = []
    for cls in CLASSES:
        ps = _linear_params() + [torch.nn.Parameter(torch.randn(2, 2, generator=torch.Generator().manual_seed(3)))]
        groups, outer = layout(ps, kwargs)
        opt = cls(groups, **outer)
        for t in range(20):
            opt.zero_grad()
            _linear_loss(ps[:2], x).backward()
            ps[2].grad = torch.rand(2, 2, generator=torch.Generator().manual_seed(10 + t))
            opt.step()
        runs.append((opt, ps))
    (ot, theirs), (oo, ours) = runs
    _assert_params_close(ours, theirs)
    _assert_states_close(oo, ours, ot, theirs)
    if layout is _groups_next_to_a_frozen_lr:
        initial = torch.randn(2, 2, generator=torch.Generator().manual_seed(3))
        torch.testing.assert_close(ours[2].detach(), initial, rtol=0, atol=1e-20)


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("num_dim", [0, 1, 2])
def test_tensor_lr_follows_torch(one_torch_thread, kwargs, num_dim):
    """Upstream's tensor-lr test: lr as a 1-element tensor of 0, 1 or 2 dims steps as torch's tensor
    lr (and as our float lr within rounding)."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(4))
    tensor_kw = {**kwargs, "lr": torch.tensor(1e-3).reshape([1] * num_dim)}
    runs = [_both(tensor_kw, _linear_params), _both({**kwargs, "lr": 1e-3}, _linear_params)[1:]]
    pairs = runs[0] + runs[1]  # torch tensor lr, ours tensor lr, ours float lr
    for _ in range(5):
        for opt, params in pairs:
            _step_with_loss(opt, params, x)
    (_, theirs), (_, ours), (_, ours_float) = pairs
    _assert_params_close(ours, theirs)
    _assert_params_close(ours, ours_float)


def test_tensor_lr_with_foreach_is_refused_like_torch():
    for cls in CLASSES:
        with pytest.raises(ValueError, match="lr as a Tensor is not supported for capturable=False and foreach=True"):
            cls(_linear_params(), lr=torch.tensor(1e-3), foreach=True)


def _complex_params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(10, 5, dtype=dtype, generator=g).requires_grad_(),
            torch.randn(10, dtype=dtype, generator=g).requires_grad_(),
            torch.randn(10, 5, dtype=torch.float32, generator=g).requires_grad_()]


@pytest.mark.parametrize("kwargs", [c for c in CONFIGS if not c.values[0].get("fused")])
def test_complex_params_step_as_their_real_views_and_as_torch(one_torch_thread, kwargs):
    """Upstream's complex tests (fused left out: torch's fused kernels refuse complex): complex params
    (a real one mixed in) step exactly as their view_as_real copies and as a pair of real / imaginary
    params; and as torch's complex AdamW."""
    cplx = _complex_params(torch.complex64)
    real = [(torch.view_as_real(p) if p.is_complex() else p).detach().clone().requires_grad_() for p in cplx]
    theirs = [p.detach().clone().requires_grad_() for p in cplx]
    opts = [tgt.optim.AdamW(cplx, **kwargs), tgt.optim.AdamW(real, **kwargs), torch.optim.AdamW(theirs, **kwargs)]
    for t in range(3):
        g = torch.Generator().manual_seed(20 + t)
        for c, r, h in zip(cplx, real, theirs):
            r.grad = torch.randn(r.shape, generator=g)
            c.grad = torch.view_as_complex(r.grad) if c.is_complex() else r.grad.clone()
            h.grad = c.grad.clone()
        for opt in opts:
            opt.step()
    for c, r, h in zip(cplx, real, theirs):
        view = torch.view_as_real(c) if c.is_complex() else c
        assert torch.equal(view, r)
        torch.testing.assert_close(c.detach(), h.detach(), **FP32)
    pair = _complex_params(torch.complex64, seed=5)[1][:2].detach().requires_grad_()
    parts = [pair.real.detach().clone().requires_grad_(), pair.imag.detach().clone().requires_grad_()]
    o1, o2 = tgt.optim.AdamW([pair], **kwargs), tgt.optim.AdamW(parts, **kwargs)
    for t in range(3):
        g = torch.view_as_real(torch.randn(2, dtype=torch.complex64, generator=torch.Generator().manual_seed(30 + t)))
        pair.grad = torch.view_as_complex(g.clone())
        parts[0].grad, parts[1].grad = g[:, 0].clone(), g[:, 1].clone()
        o1.step()
        o2.step()
        assert torch.equal(pair.real, parts[0]) and torch.equal(pair.imag, parts[1])


def _sequential_model(dtype, seed=1):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sigmoid(), torch.nn.Linear(3, 1), torch.nn.Sigmoid())
    return model.to(dtype)


@pytest.mark.parametrize("flag,dtype", [("foreach", torch.float64), ("foreach", torch.float32)] +
                         [("fused", d) for d in (torch.float64, torch.float32, torch.bfloat16, torch.float16)],
                         ids=lambda v: str(v).replace("torch.", ""))
def test_implementation_flags_follow_torch(one_torch_thread, flag, dtype):
    """Upstream's foreach / fused-matches-forloop tests, compared with torch: a small model plus a
    0-dim param, one step without grads and a layer frozen for two steps; ours with the flag on gives
    ours with it off (bit for bit: one path) and torch's with it on (float64: to the bit against
    torch's for-loop, whose order we follow; 16 bits within torch's own fused tolerance: torch's
    fused kernel computes in float32 too, its 16-bit foreach rounds every op and is not compared)."""
    x = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], dtype=dtype).reshape(3, 2)
    for oi in INFO.optim_inputs_func(device="cpu", dtype=dtype):
        runs = []
        for cls, value in ((torch.optim.AdamW, True), (torch.optim.AdamW, False), (tgt.optim.AdamW, True),
                           (tgt.optim.AdamW, False)):
            model = _sequential_model(dtype)
            scalar = torch.full((), 0.25, dtype=dtype, requires_grad=True)  # upstream's 0-dim last param
            scalar.grad = torch.full((), 0.75, dtype=dtype)
            params = list(model.parameters()) + [scalar]
            opt = cls(params, **{**oi.kwargs, flag: value})
            for i in range(7):
                opt.zero_grad()
                model[2].requires_grad_(i not in (3, 4))
                if i != 2:
                    model(x).sum().backward()
                opt.step()
            runs.append((opt, params))
        (ot, theirs), (ot_loop, theirs_loop), (oo, ours), (oo_off, ours_off) = runs
        _assert_params_close(ours, ours_off, rtol=0, atol=0)
        _assert_states_close(oo, ours, oo_off, ours_off, rtol=0, atol=0)
        if dtype == torch.float64:
            _assert_params_close(ours, theirs_loop, rtol=0, atol=0)
            _assert_states_close(oo, ours, ot_loop, theirs_loop, rtol=0, atol=0)
        tol = LOW_PRECISION if dtype in (torch.bfloat16, torch.float16) else {}
        _assert_params_close(ours, theirs, **tol)
        _assert_states_close(oo, ours, ot, theirs, **tol)


@pytest.mark.parametrize("kwargs", [c for c in CONFIGS if c.values[0].get("fused")])
@pytest.mark.parametrize("grad_scale", [True, False], ids=["grad_scale", "no_grad_scale"])
def test_found_inf_skips_the_step_like_torch_fused(kwargs, grad_scale):
    """Upstream's fused-does-not-step-if-found-inf test (CUDA-only there; torch's fused CPU kernel
    does the same): found_inf == 1 leaves params, grads and steps alone, in ours as in torch's."""
    for cls in CLASSES:
        params = [torch.ones(1) for _ in range(5)]
        for p in params:
            p.grad = torch.ones_like(p)
        opt = cls(params, **kwargs)
        opt.grad_scale = torch.ones(1) if grad_scale else None
        opt.found_inf = torch.ones(())
        opt.step()
        assert all(float(opt.state[p]["step"]) == 0.0 for p in params if "step" in opt.state[p])
        assert all(torch.equal(p, torch.ones(1)) and torch.equal(p.grad, torch.ones(1)) for p in params)


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_steps_without_grads_or_with_zero_grads_like_torch(kwargs):
    """Upstream's no-op tests: params without grads are left alone (no state either); zero grads at
    lr 1e-5 (weight decay not set in the config) leave the param where torch's leaves it, within
    float32 tolerance of where it was; the grads are never written."""
    moved = []
    for cls in CLASSES:
        frozen = [torch.randn(2, 3) for _ in range(2)]
        before = [p.clone() for p in frozen]
        opt = cls(frozen, **kwargs)
        assert opt.step(lambda: torch.tensor([1.0])) == torch.tensor([1.0])
        assert all(torch.equal(p, q) for p, q in zip(frozen, before)) and len(opt.state) == 0
        param = torch.randn(5, 1, requires_grad=True, generator=torch.Generator().manual_seed(16))
        param.grad = torch.rand_like(param)
        version = param.grad._version
        opt = cls([param], **kwargs)
        for _ in range(5):
            opt.step()
        assert param.grad._version == version
        if kwargs.get("weight_decay", 0) == 0:
            param = torch.randn(5, 1, requires_grad=True, generator=torch.Generator().manual_seed(17))
            old = param.detach().clone()
            param.grad = torch.zeros_like(param)
            cls([param], **{**kwargs, "lr": 1e-5}).step()
            torch.testing.assert_close(param.detach(), old)
            moved.append(param.detach())
    if moved:
        torch.testing.assert_close(moved[1], moved[0], rtol=2 ** -23, atol=0)


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_repr_is_torch_repr(kwargs):
    params = _linear_params()
    assert repr(tgt.optim.AdamW(params, **kwargs)) == repr(torch.optim.AdamW(params, **kwargs))


def _named(params, named):
    return [(f"name{i}", p) for i, p in enumerate(params)] if named else params


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("named", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["plain", "named_first", "named_second", "named_both"])
def test_state_dict_round_trips_like_torch(one_torch_thread, kwargs, named):
    """Upstream's deterministic state-dict test, both ways: an optimizer primed 10 steps hands its
    state dict (plain or named params) to a fresh one of either class on cloned params; every pair
    then steps alike, and the state dicts agree with torch's (keys, param groups, values)."""
    x = torch.randn(3, generator=torch.Generator().manual_seed(6))
    primed = {}
    for cls in CLASSES:
        params = [torch.nn.Parameter(torch.randn(2, 3, generator=torch.Generator().manual_seed(7))),
                  torch.nn.Parameter(torch.randn(2, generator=torch.Generator().manual_seed(8)))]
        opt = cls(_named(params, named[0]), **kwargs)
        for _ in range(10):
            _step_with_loss(opt, params, x)
        primed[cls] = (opt, params)
    sd_theirs, sd_ours = (primed[cls][0].state_dict() for cls in CLASSES)
    assert sd_ours["param_groups"] == sd_theirs["param_groups"]
    torch.testing.assert_close(sd_ours["state"], sd_theirs["state"], **FP32)
    for source in CLASSES:
        for target in CLASSES:
            opt, params = primed[source]
            clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
            twin = target(_named(clones, named[1]), **kwargs)
            twin.load_state_dict(copy.deepcopy(opt.state_dict()))
            ref_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
            ref = source(ref_params, **kwargs)
            ref.load_state_dict(copy.deepcopy(opt.state_dict()))
            for _ in range(10):
                _step_with_loss(twin, clones, x)
                _step_with_loss(ref, ref_params, x)
            _assert_params_close(clones, ref_params)
            if named[0] or named[1]:
                assert twin.state_dict()["param_groups"][0]["param_names"] == ["name0", "name1"]
            # A repeated group is stored as its first listing (upstream's check for issue 36831).
            twin.param_groups.extend(twin.param_groups)
            last = [{k: v for k, v in o.state_dict()["param_groups"][-1].items() if k != "param_names"}
                    for o in (twin, ref)]
            assert last[0] == last[1]


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_older_state_dicts_load_like_torch(one_torch_thread, kwargs):
    """Upstream's BC tests: a state dict without the flags AdamW gained later (optim_db's
    not_og_supported_flags), and one whose steps are plain numbers, load and step on as in torch."""
    x = torch.rand(1, 4, 16, 16, generator=torch.Generator().manual_seed(9))
    runs = []
    for cls in CLASSES:
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Conv2d(4, 2, 1, stride=2), torch.nn.BatchNorm2d(2))
        opt = cls(model.parameters(), **kwargs)
        for _ in range(3):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        old = copy.deepcopy(opt.state_dict())
        for group in old["param_groups"]:
            for flag in INFO.not_og_supported_flags:
                group.pop(flag, None)
        for state in old["state"].values():
            state["step"] = state["step"].item()
        opt.load_state_dict(old)
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        runs.append((opt, list(model.parameters()), [g.keys() for g in opt.param_groups]))
    (ot, theirs, keys_theirs), (oo, ours, keys_ours) = runs
    assert keys_ours == keys_theirs
    _assert_params_close(ours, theirs)
    _assert_states_close(oo, ours, ot, theirs)


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_saved_state_dict_loads_with_weights_only(kwargs, tmp_path):
    """torch.save / torch.load(weights_only=True) of our state dict gives it back, as torch's does."""
    params = _linear_params()
    opt = tgt.optim.AdamW(_named(params, True), **kwargs)
    x = torch.randn(5)
    for _ in range(3):
        opt.step(functools.partial(_closure, opt, params, x))
    sd = opt.state_dict()
    torch.save(sd, tmp_path / "sd.pt")
    for weights_only in (False, True):
        loaded = torch.load(tmp_path / "sd.pt", weights_only=weights_only)
        assert loaded["param_groups"] == sd["param_groups"]
        torch.testing.assert_close(loaded["state"], sd["state"], rtol=0, atol=0)


def _state_dict_pre_hook(opt):
    opt.state["test"] = 1


def _state_dict_post_hook(opt, state_dict):
    state_dict["ran_state_dict_pre_hook"] = state_dict["state"].pop("test", None) is not None
    return state_dict


def _load_pre_hook_lr(lr):
    def hook(opt, state_dict):
        state_dict = copy.deepcopy(state_dict)
        state_dict["param_groups"][0]["lr"] = lr
        return state_dict
    return hook


def _load_post_hook(opt):
    opt.state["lr_after_load"] = opt.param_groups[0]["lr"]


def _hooks_run(cls, kwargs):
    """Everything upstream's hook tests observe, for one class: state-dict pre / post hooks, load
    pre hooks (prepend) and post hooks, step pre / post hooks, global step hooks and their removal."""
    seen = {}
    param = torch.rand(2, 3, requires_grad=True)
    opt = cls([param], **kwargs)
    opt.register_state_dict_pre_hook(_state_dict_pre_hook)
    seen["pre"] = opt.state_dict()["state"].get("test")
    opt.register_state_dict_post_hook(_state_dict_post_hook)
    sd = opt.state_dict()
    seen["post"] = (sd["ran_state_dict_pre_hook"], "test" in sd["state"])
    opt = cls([param], **kwargs)
    sd = opt.state_dict()
    opt.register_load_state_dict_pre_hook(_load_pre_hook_lr(0.002))
    opt.register_load_state_dict_post_hook(_load_post_hook)
    opt.load_state_dict(sd)
    opt.register_load_state_dict_pre_hook(_load_pre_hook_lr(0.003), prepend=True)
    opt.load_state_dict(sd)
    seen["load"] = (opt.param_groups[0]["lr"], opt.state["lr_after_load"])
    data = []
    params = [torch.tensor([[1.0, 1.0]])]
    opt, sgd = cls(params, **kwargs), torch.optim.SGD(params)
    handles = [register_optimizer_step_pre_hook(lambda *a: data.append(0)),
               register_optimizer_step_post_hook(lambda *a: data.append(5))]
    for o in (opt, sgd):
        handles += [o.register_step_pre_hook(lambda *a: data.append(1)),
                    o.register_step_post_hook(lambda *a: data.append(2))]
    opt.step()
    sgd.step()
    opt.step()
    for h in handles:
        h.remove()
    opt.step()
    seen["steps"] = list(data)
    return seen


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_hooks_fire_as_in_torch(kwargs):
    ours, theirs = _hooks_run(tgt.optim.AdamW, kwargs), _hooks_run(torch.optim.AdamW, kwargs)
    assert ours == theirs
    assert ours["steps"] == [0, 1, 2, 5] * 3 and ours["load"] == (0.002, 0.002)


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("copier", [copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))], ids=["deepcopy", "pickle"])
def test_copies_keep_every_public_attribute_and_step_on(one_torch_thread, kwargs, copier):
    """Upstream's deepcopy test (every public attribute kept), with pickle too; the copy steps on as
    a torch.optim.AdamW copy does."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(11))
    copies = []
    for cls in CLASSES:
        params = _linear_params()
        opt = cls(params, **kwargs)
        for _ in range(3):
            _step_with_loss(opt, params, x)
        twin = copier(opt)
        assert {k for k in vars(twin) if not k.startswith("_")} == {k for k in vars(opt) if not k.startswith("_")}
        twin_params = _plain(twin.param_groups[0]["params"])
        for _ in range(3):
            _step_with_loss(twin, twin_params, x)
        copies.append((twin, twin_params))
    (ot, theirs), (oo, ours) = copies
    _assert_params_close(ours, theirs)
    _assert_states_close(oo, ours, ot, theirs)


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_state_has_torch_keys_and_steps(kwargs):
    """Upstream's non-empty-state test, compared: after one step every param's state has torch's keys,
    dtypes and step count."""
    states = []
    for opt, params in _both(kwargs, lambda: [torch.nn.Parameter(torch.randn(5, 5, generator=torch.Generator().manual_seed(12)))]):
        opt.zero_grad()
        params[0].sum().backward()
        opt.step()
        states.append(opt.state[params[0]])
    theirs, ours = states
    assert ours.keys() == theirs.keys() and len(ours) > 0
    assert {k: (v.dtype, float(v) if k == "step" else None) for k, v in ours.items()} == \
           {k: (v.dtype, float(v) if k == "step" else None) for k, v in theirs.items()}


@pytest.mark.parametrize("source_dtype,target_dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                                       (torch.float64, torch.float32)], ids=str)
def test_state_dict_loads_into_params_of_another_dtype_like_torch(one_torch_thread, source_dtype, target_dtype):
    """A state dict saved with params of one dtype, loaded into params of another: the state is cast
    as torch casts it, and the next steps match torch's."""
    g = torch.Generator().manual_seed(13)
    src = [torch.nn.Parameter(torch.randn(4, 3, generator=g).to(source_dtype))]
    opt = torch.optim.AdamW(src, lr=1e-2)
    src[0].grad = torch.randn(4, 3, generator=g).to(source_dtype)
    opt.step()
    sd = opt.state_dict()
    runs = []
    for cls in CLASSES:
        params = [torch.nn.Parameter(src[0].detach().to(target_dtype))]
        o = cls(params, lr=1e-2)
        o.load_state_dict(copy.deepcopy(sd))
        for t in range(3):
            params[0].grad = torch.randn(4, 3, generator=torch.Generator().manual_seed(14 + t)).to(target_dtype)
            o.step()
        runs.append((o, params))
    (ot, theirs), (oo, ours) = runs
    tol = LOW_PRECISION if target_dtype == torch.bfloat16 else {}
    _assert_params_close(ours, theirs, **tol)
    _assert_states_close(oo, ours, ot, theirs, **tol)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_like_torch(set_to_none):
    grads = []
    for opt, params in _both({}, _linear_params):
        for p in params:
            p.grad = torch.ones_like(p)
        opt.zero_grad(set_to_none=set_to_none)
        grads.append([p.grad for p in params])
    theirs, ours = grads
    for a, b in zip(ours, theirs):
        assert (a is None and b is None) or torch.equal(a, b)


SCHEDULERS = {
    "StepLR": lambda o: torch.optim.lr_scheduler.StepLR(o, gamma=0.9, step_size=3),
    "OneCycleLR": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=20),
    "CosineAnnealingLR": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7),
    "LambdaLR": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda t: 1.0 / (1 + t)),
    "LinearLR+ExponentialLR": lambda o: torch.optim.lr_scheduler.ChainedScheduler(
        [torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=5),
         torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.95)]),
}


@pytest.mark.parametrize("name", SCHEDULERS)
@pytest.mark.parametrize("tensor_lr", [False, True], ids=["float_lr", "tensor_lr"])
def test_lr_schedulers_drive_it_like_torch(one_torch_thread, name, tensor_lr):
    """LR schedulers over two param groups (a float or tensor lr): the same lr sequence and params."""
    x = torch.randn(5, generator=torch.Generator().manual_seed(15))
    runs = []
    for cls in CLASSES:
        params = _linear_params()
        lr = torch.tensor(1e-2) if tensor_lr else 1e-2
        opt = cls([{"params": params[:1]}, {"params": params[1:], "lr": 3e-3}], lr=lr)
        sched = SCHEDULERS[name](opt)
        lrs = []
        for _ in range(20):
            _step_with_loss(opt, params, x)
            sched.step()
            lrs.append([float(g["lr"]) for g in opt.param_groups])
        runs.append((params, lrs))
    (theirs, lrs_theirs), (ours, lrs_ours) = runs
    assert lrs_ours == lrs_theirs
    _assert_params_close(ours, theirs)


def test_adam_and_older_adamw_state_dicts_keep_decoupled_weight_decay():
    """Upstream's AdamW serialization test, for ours: loading torch's Adam state dict, or an AdamW one
    from before the decoupled_weight_decay key, leaves decoupled_weight_decay True."""
    model = torch.nn.Linear(5, 5)
    adam_sd = torch.optim.Adam(model.parameters()).state_dict()
    assert adam_sd["param_groups"][0]["decoupled_weight_decay"] is False
    old_adamw_sd = copy.deepcopy(torch.optim.AdamW(model.parameters()).state_dict())
    del old_adamw_sd["param_groups"][0]["decoupled_weight_decay"]
    for sd in (adam_sd, old_adamw_sd):
        for cls in CLASSES:
            opt = cls(model.parameters())
            opt.load_state_dict(copy.deepcopy(sd))
            assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_differentiable_is_refused_with_a_clear_error():
    """Upstream's configurations also run differentiable=True (autograd through the step, torch's
    for-loop only); ours has one fused, non-differentiable step and says so."""
    assert "differentiable" in INFO.supported_impls
    with pytest.raises(ValueError, match="tilegrad.torch.optim.AdamW: differentiable must be False .* torch.optim.AdamW"):
        tgt.optim.AdamW(_linear_params(), differentiable=True)
