"""tgt.linear_cross_entropy(..., softcap=c): the logits capped as c * tanh(z / c) before the cross
entropy (Gemma 2 / 3's final_logit_softcapping) on every path (the fused op, torch ops below the
crossover and for what the kernels do not take, torch.compile, second derivatives), against the
float64 formula; and its argument checks."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _linear_cross_entropy  # noqa: E402
from tilegrad.torch._eager import Path  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _problem(dtype, seed=0, rows=24, hidden=16, vocab=40):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, hidden, generator=g) * 2).to(dtype).requires_grad_()
    w = (torch.randn(vocab, hidden, generator=g) * 2).to(dtype).requires_grad_()
    target = torch.randint(0, vocab, (rows,), generator=g)
    target[:3] = -100
    return x, w, target


def _reference(x, w, target, softcap, reduction):
    """float64: F.linear, the cap, F.cross_entropy."""
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    logits = F.linear(x64, w64)
    logits = torch.tanh(logits / softcap) * softcap
    loss = F.cross_entropy(logits, target, reduction=reduction)
    return loss, x64, w64


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("path", [Path.KERNEL, Path.COMPOSITE, Path.TORCH], ids=["kernel", "composite", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_softcap_matches_float64(monkeypatch, dtype, path, reduction):
    monkeypatch.setattr(_linear_cross_entropy, "route", lambda *a, **k: path)
    x, w, target = _problem(dtype)
    loss = tgt.linear_cross_entropy(x, w, target, reduction=reduction, softcap=3.0, loss_dtype=torch.float32)
    if path is Path.KERNEL and reduction != "none":
        assert "LinearCrossEntropyFunctionBackward" in autograd_node_names(loss)
    upstream = torch.ones_like(loss)
    dx, dw = torch.autograd.grad(loss, (x, w), upstream)
    want, x64, w64 = _reference(x, w, target, 3.0, reduction)
    want_dx, want_dw = torch.autograd.grad(want, (x64, w64), upstream.double())
    tol = 2e-5 if dtype == torch.float32 else 2 ** -6
    torch.testing.assert_close(loss.double(), want.detach(), rtol=tol, atol=tol)
    for got, ref in ((dx, want_dx), (dw, want_dw)):
        assert (got.double() - ref).abs().max().item() <= tol * max(1.0, ref.abs().max().item())


def test_softcap_changes_the_loss_and_none_or_inf_is_no_cap():
    x, w, target = _problem(torch.float32, seed=1)
    plain = tgt.linear_cross_entropy(x, w, target)
    assert torch.equal(tgt.linear_cross_entropy(x, w, target, softcap=None), plain)
    assert torch.equal(tgt.linear_cross_entropy(x, w, target, softcap=float("inf")), plain)
    capped = tgt.linear_cross_entropy(x, w, target, softcap=2.0)
    assert abs(capped.item() - plain.item()) > 1e-3


def test_softcap_under_compile_and_second_derivatives():
    torch._dynamo.reset()
    x, w, target = _problem(torch.float32, seed=2)

    def loss_fn(x, w):
        return tgt.linear_cross_entropy(x, w, target, softcap=5.0)

    eager = loss_fn(x, w)
    grads = torch.autograd.grad(eager, (x, w))
    compiled = torch.compile(loss_fn, fullgraph=True, backend="aot_eager")(x, w)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(torch.autograd.grad(compiled, (x, w)), grads)
    # second derivatives recompute through the float32 composite, cap included
    (gx,) = torch.autograd.grad(loss_fn(x, w), x, create_graph=True)
    want, x64, w64 = _reference(x, w, target, 5.0, "mean")
    (want_gx,) = torch.autograd.grad(want, x64, create_graph=True)
    torch.testing.assert_close(gx.double(), want_gx, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(torch.autograd.grad(gx.pow(2).sum(), w)[0].double(),
                               torch.autograd.grad(want_gx.pow(2).sum(), w64)[0], rtol=1e-4, atol=1e-6)


def test_bad_softcap_names_tilegrad_and_the_value():
    x, w, target = _problem(torch.float32)
    with pytest.raises(ValueError, match=r"tilegrad.torch.linear_cross_entropy: softcap must be None or a float > 0, "
                                         r"got -1.0"):
        tgt.linear_cross_entropy(x, w, target, softcap=-1.0)
    with pytest.raises(TypeError, match="tilegrad.torch.linear_cross_entropy: softcap"):
        tgt.linear_cross_entropy(x, w, target, softcap="3")
