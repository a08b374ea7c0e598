"""tilegrad.torch.linear_cross_entropy against torch's F.linear_cross_entropy in float64 (issue 20):
hidden size 0, only the gradients autograd asks for, one pending precomputed call at a most, the
module's options on the fallback path, second derivatives and torch.func, the small-size crossover."""

import math

import pytest
import torch
import torch.nn.functional as F

import tilegrad.torch as tgt
from tilegrad import _fused_linear_cross_entropy as flce_numpy
from tilegrad.torch import _linear_cross_entropy as LCE
from tilegrad.torch._eager import CROSSOVER
from tilegrad.torch import functional as TF
from tilegrad.torch import nn as tnn
from tilegrad.torch import patch, unpatch

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def no_crossover(monkeypatch):
    """Every size on tilegrad's kernel path (the crossover would send these small problems to torch)."""
    monkeypatch.setitem(CROSSOVER, "linear_cross_entropy", {})


@pytest.fixture
def spy_fused(monkeypatch):
    """The gradient flags of every fused-op call."""
    calls = []
    real = flce_numpy.fused_linear_cross_entropy

    def spy(*args, **kwargs):
        calls.append((kwargs["grad_input"], kwargs["grad_weight"], kwargs["grad_output"] is not None))
        return real(*args, **kwargs)

    monkeypatch.setattr(flce_numpy, "fused_linear_cross_entropy", spy)
    return calls


def _problem(rows=24, hidden=16, vocab=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, hidden, generator=g)
    w = torch.randn(vocab, hidden, generator=g) * 0.3
    t = torch.randint(0, vocab, (rows,), generator=g)
    t[min(3, rows - 1)] = -100
    return x, w, t


def _torch64(x, w, t, **kwargs):
    """torch's loss and gradients in float64 (the reference)."""
    x64 = x.detach().double().requires_grad_(x.requires_grad)
    w64 = w.detach().double().requires_grad_(w.requires_grad)
    loss = F.linear_cross_entropy(x64, w64, t, **kwargs)
    return loss, x64, w64


# ---------------------------------------------------------------------------------------------------
# 1. hidden size 0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "crossover"])
def test_hidden_size_zero_is_log_vocab_per_row(reduction, kernel, monkeypatch):
    if kernel:
        monkeypatch.setitem(CROSSOVER, "linear_cross_entropy", {})
    x = torch.zeros(5, 0, requires_grad=True)
    w = torch.zeros(7, 0, requires_grad=True)
    t = torch.tensor([0, 6, 3, -100, 2])
    loss = tgt.linear_cross_entropy(x, w, t, reduction=reduction)
    ref, x64, w64 = _torch64(x, w, t, reduction=reduction)
    torch.testing.assert_close(loss.double(), ref.detach(), **TOL)
    if reduction == "mean":
        assert math.isclose(float(loss), math.log(7), rel_tol=1e-6)
    loss.sum().backward()
    assert x.grad.shape == (5, 0) and w.grad.shape == (7, 0)


# ---------------------------------------------------------------------------------------------------
# 2. only the gradients autograd asks for


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_frozen_weight_computes_no_weight_gradient(dtype, reduction, no_crossover, spy_fused):
    x, w, t = _problem()
    xa = x.to(dtype).requires_grad_()
    loss = tgt.linear_cross_entropy(xa, w.to(dtype), t, reduction=reduction)
    loss.sum().backward()
    ref, x64, _ = _torch64(x.to(dtype).requires_grad_(), w.to(dtype), t, reduction=reduction)
    ref.sum().backward()
    tol = TOL if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(loss.double(), ref.detach(), **tol)
    torch.testing.assert_close(xa.grad.double(), x64.grad, **tol)
    assert spy_fused and all(not wants_weight for _, wants_weight, _ in spy_fused)


def test_input_without_grad_computes_no_input_gradient(no_crossover, spy_fused):
    x, w, t = _problem()
    wa = w.clone().requires_grad_()
    tgt.linear_cross_entropy(x, wa, t, reduction="sum").backward()
    ref, _, w64 = _torch64(x, w.clone().requires_grad_(), t, reduction="sum")
    ref.backward()
    torch.testing.assert_close(wa.grad.double(), w64.grad, **TOL)
    assert spy_fused and all(not wants_input for wants_input, _, _ in spy_fused)


def test_no_grad_computes_the_loss_alone(no_crossover, spy_fused):
    x, w, t = _problem()
    with torch.no_grad():
        loss = tgt.linear_cross_entropy(x, w.requires_grad_(), t)
    torch.testing.assert_close(loss.double(), _torch64(x, w, t)[0].detach(), **TOL)
    assert spy_fused == [(False, False, False)]


# ---------------------------------------------------------------------------------------------------
# 3. at most one pending call holds precomputed gradients


def test_chunked_forwards_hold_one_precomputed_call(no_crossover):
    x, w, t = _problem(rows=64)
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    losses = [tgt.linear_cross_entropy(xc, wa, tc, reduction="sum") for xc, tc in zip(xa.chunk(8), t.chunk(8))]
    assert LCE.pending_calls() == 1
    total = sum((i + 1) * loss for i, loss in enumerate(losses))  # a different upstream gradient per chunk
    total.backward()
    assert LCE.pending_calls() == 0
    x64, w64 = x.double().requires_grad_(), w.double().requires_grad_()
    sum((i + 1) * F.linear_cross_entropy(xc, w64, tc, reduction="sum")
        for i, (xc, tc) in enumerate(zip(x64.chunk(8), t.chunk(8)))).backward()
    torch.testing.assert_close(xa.grad.double(), x64.grad, **TOL)
    torch.testing.assert_close(wa.grad.double(), w64.grad, **TOL)


def test_a_freed_graph_releases_its_pending_call(no_crossover):
    x, w, t = _problem()
    loss = tgt.linear_cross_entropy(x.requires_grad_(), w, t)
    assert LCE.pending_calls() == 1
    del loss
    assert LCE.pending_calls() == 0


def test_retain_graph_second_backward_recomputes(no_crossover):
    x, w, t = _problem()
    wa = w.clone().requires_grad_()
    loss = tgt.linear_cross_entropy(x, wa, t)
    loss.backward(retain_graph=True)
    first = wa.grad.clone()
    loss.backward(torch.tensor(3.0))
    torch.testing.assert_close(wa.grad, 4 * first, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bias_class_weight_smoothing_every_reduction(reduction, no_crossover):
    x, w, t = _problem()
    g = torch.Generator().manual_seed(1)
    b, cw = torch.randn(w.shape[0], generator=g), torch.rand(w.shape[0], generator=g) + 0.5
    xa, wa, ba = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    kwargs = dict(weight=cw, reduction=reduction, label_smoothing=0.1)
    up = torch.rand(x.shape[0], generator=g) if reduction == "none" else torch.tensor(0.7)
    loss = tgt.linear_cross_entropy(xa, wa, t, linear_bias=ba, **kwargs)
    loss.backward(up)
    x64, w64, b64 = (v.double().requires_grad_() for v in (x, w, b))
    ref = F.linear_cross_entropy(x64, w64, t, linear_bias=b64, **{**kwargs, "weight": cw.double()})
    ref.backward(up.double())
    torch.testing.assert_close(loss.double(), ref.detach(), **TOL)
    for got, want in ((xa, x64), (wa, w64), (ba, b64)):
        torch.testing.assert_close(got.grad.double(), want.grad, **TOL)


# ---------------------------------------------------------------------------------------------------
# 4. the module: options on the fallback path; patch / unpatch


def test_module_passes_its_options_to_torch_on_the_fallback(monkeypatch):
    options = torch.nn.LinearCrossEntropyOptions() if hasattr(torch.nn, "LinearCrossEntropyOptions") else object()
    seen = []
    real = TF.TORCH_FUNCTIONS["linear_cross_entropy"]

    def spy(*args, **kwargs):
        seen.append(kwargs.get("options"))
        return real(*args, **kwargs)

    monkeypatch.setitem(TF.TORCH_FUNCTIONS, "linear_cross_entropy", spy)
    module = tnn.LinearCrossEntropyLoss(16, 40, options=options).double()  # float64: torch's path
    x, _, t = _problem()
    loss = module(x.double(), t)
    assert seen == [options]
    ref = F.linear_cross_entropy(x.double(), module.linear.weight, t, ignore_index=-100)
    torch.testing.assert_close(loss, ref)


def test_patch_replaces_and_unpatch_restores_the_torch_module():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LinearCrossEntropyLoss(16, 40))
    patch(model)
    assert type(model[1]) is tnn.LinearCrossEntropyLoss
    unpatch(model)
    assert type(model[1]) is torch.nn.LinearCrossEntropyLoss


# ---------------------------------------------------------------------------------------------------
# 5. second derivatives, torch.func


def _penalty_grads(fn, x, w, t, reduction):
    """g = d loss / d x with create_graph=True, then (g**2).sum().backward(): (lin.weight.grad, w.grad)."""
    x = x.clone().requires_grad_()
    lin = torch.nn.Linear(x.shape[1], x.shape[1], dtype=x.dtype)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(x.shape[1]) * 0.9)
        lin.bias.zero_()
    w = w.clone().requires_grad_()
    loss = fn(lin(x), w, t, reduction=reduction).sum()
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    g.pow(2).sum().backward()
    return lin.weight.grad, w.grad


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "crossover"])
def test_input_gradient_penalty_matches_torch(reduction, kernel, monkeypatch):
    """An input-gradient penalty's gradients as torch's (float64)."""
    if kernel:
        monkeypatch.setitem(CROSSOVER, "linear_cross_entropy", {})
    x, w, t = _problem()
    got = _penalty_grads(tgt.linear_cross_entropy, x, w, t, reduction)
    want = _penalty_grads(F.linear_cross_entropy, x.double(), w.double(), t, reduction)
    for a, b in zip(got, want):
        assert a is not None and b is not None
        torch.testing.assert_close(a.double(), b, **TOL)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.usefixtures("kernels_at_every_size")  # (tests/torch/conftest.py) cross_entropy's node too
def test_input_gradient_penalty_with_torch_functional_routed_to_tilegrad(reduction):
    """After tgt.enable(), F.cross_entropy is tilegrad's, whose node refuses second derivatives: the
    second-derivative path recomputes through torch's own cross entropy, so the penalty still matches
    torch's (float64, computed before enable)."""
    x, w, t = _problem()
    want = _penalty_grads(F.linear_cross_entropy, x.double(), w.double(), t, reduction)
    tgt.enable()
    try:
        got = _penalty_grads(tgt.linear_cross_entropy, x, w, t, reduction)
    finally:
        tgt.disable()
    for a, b in zip(got, want):
        assert a is not None and b is not None
        torch.testing.assert_close(a.double(), b, **TOL)


def test_torch_func_grad_vmap_functional_call(no_crossover):
    x, w, t = _problem()
    gx = torch.func.grad(lambda x: tgt.linear_cross_entropy(x, w, t))(x)
    ref, x64, _ = _torch64(x.requires_grad_(), w, t)
    ref.backward()
    torch.testing.assert_close(gx.double(), x64.grad, **TOL)

    per_sample = torch.func.vmap(lambda xi, ti: tgt.linear_cross_entropy(xi, w, ti))(x.detach()[:3], t[:3])
    torch.testing.assert_close(per_sample.double(), F.linear_cross_entropy(
        x.detach().double()[:3], w.double(), t[:3], reduction="none"), **TOL)

    module = tnn.LinearCrossEntropyLoss(16, 40)
    params = {"linear.weight": w}
    out = torch.func.functional_call(module, params, (x.detach(), t))
    torch.testing.assert_close(out.double(), F.linear_cross_entropy(x.detach().double(), w.double(), t), **TOL)


# ---------------------------------------------------------------------------------------------------
# 6. the crossover: below it torch's composite, same values


def test_below_the_crossover_is_torchs_composite(spy_fused):
    x, w, t = _problem(rows=2, hidden=4, vocab=8)
    assert LCE.multiply_adds(x, w) < CROSSOVER["linear_cross_entropy"][torch.float32]
    loss = tgt.linear_cross_entropy(x.requires_grad_(), w, t)
    assert spy_fused == []
    torch.testing.assert_close(loss.double(), _torch64(x, w, t)[0].detach(), **TOL)
