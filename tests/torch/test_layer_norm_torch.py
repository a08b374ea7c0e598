"""tilegrad.torch.layer_norm and tgt.nn.LayerNorm against float64 F.layer_norm (forward and every
gradient, weight / bias present or absent, every dtype), on the kernel path and on the composite path
(each forced), opcheck, torch.compile(fullgraph=True), what autograd saves, thread-count independence,
second derivatives and the fallbacks."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._eager import CROSSOVER  # noqa: E402
from reference.torch_compare import (assert_compiled_matches_eager, assert_gradients_do_not_depend_on_threads,  # noqa: E402
                                     assert_second_derivatives_match, saved_bytes)

pytestmark = pytest.mark.usefixtures("one_torch_thread", "kernels_at_every_size")  # tests/torch/conftest.py

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# forward / gradient tolerance against float64, relative to the reference's largest magnitude
TOL = {torch.float32: 4e-6, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}
# (x dtype, parameter dtype): the vendor's pairs, fp32 parameters with 16-bit inputs among them
PAIRS = [(d, d) for d in DTYPES] + [(d, torch.float32) for d in DTYPES[1:]]
AFFINE = [(True, True), (True, False), (False, True), (False, False)]


@pytest.fixture(params=["kernel", "composite"])
def route(request, monkeypatch):
    """Forces the path: the eager kernel node at every size, or torch's composite at every size."""
    if request.param == "composite":
        monkeypatch.setitem(CROSSOVER, "layer_norm", {d: 1 << 40 for d in DTYPES})
    return request.param


def assert_close_to(got, want, dtype, scale=1.0):
    """Each element within TOL[dtype] * max|want| (plus one output rounding) of the float64 reference."""
    got, want = got.double(), want.double()
    bound = scale * TOL[dtype] * max(1.0, want.abs().max().item())
    err = (got - want).abs().max().item()
    assert err <= bound, f"max error {err} > {bound}"


def _case(shape, normalized, dtype, pdtype, weight, bias, seed=1):
    g = torch.Generator().manual_seed(seed)
    x64 = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + 0.5
    w64 = 1 + 0.5 * torch.randn(normalized, generator=g, dtype=torch.float64)
    b64 = 0.5 * torch.randn(normalized, generator=g, dtype=torch.float64)
    dy64 = torch.randn(shape, generator=g, dtype=torch.float64)
    x = x64.to(dtype).requires_grad_()
    w = w64.to(pdtype).requires_grad_() if weight else None
    b = b64.to(pdtype).requires_grad_() if bias else None
    return x, w, b, dy64.to(dtype)


def _float64_reference(x, w, b, dy, normalized, eps):
    """F.layer_norm in float64 on the same (rounded) values: forward and gradients."""
    leaves = [None if t is None else t.detach().double().requires_grad_() for t in (x, w, b)]
    y = F.layer_norm(leaves[0], normalized, leaves[1], leaves[2], eps)
    y.backward(dy.double())
    return y.detach(), [None if t is None else t.grad for t in leaves]


@pytest.mark.parametrize("dtype,pdtype", PAIRS)
@pytest.mark.parametrize("weight,bias", AFFINE, ids=["wb", "w", "b", "none"])
@pytest.mark.parametrize("shape,normalized", [((3, 5, 64), (64,)), ((3, 5, 33), (5, 33)), ((7, 1), (1,))])
def test_matches_float64_on_both_routes(route, dtype, pdtype, weight, bias, shape, normalized):
    x, w, b, dy = _case(shape, normalized, dtype, pdtype, weight, bias)
    y = tgt.layer_norm(x, normalized, w, b, 1e-5)
    if route == "kernel":
        assert type(y.grad_fn).__name__ == "TilegradLayerNormBackward"
    else:
        assert not type(y.grad_fn).__name__.startswith("Tilegrad")
    y.backward(dy)
    yr, (dxr, dwr, dbr) = _float64_reference(x, w, b, dy, normalized, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    assert_close_to(y.detach(), yr, dtype)
    assert x.grad.dtype == dtype
    assert_close_to(x.grad, dxr, dtype, scale=8)
    for p, ref in ((w, dwr), (b, dbr)):
        if p is not None:
            assert p.grad.dtype == pdtype
            assert_close_to(p.grad, ref, pdtype if pdtype == torch.float32 else dtype, scale=8)


def test_matches_torch_at_its_own_precision(route):
    """torch's own CPU F.layer_norm, fp32: the same numbers to a few fp32 ulps."""
    x, w, b, dy = _case((16, 300), (300,), torch.float32, torch.float32, True, True, seed=2)
    y = tgt.layer_norm(x, (300,), w, b)
    y.backward(dy)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = F.layer_norm(xr, (300,), wr, br)
    yr.backward(dy)
    torch.testing.assert_close(y, yr, rtol=1e-5, atol=1e-5)
    for a, e in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)


def test_saves_only_input_stats_and_parameters():
    x = torch.randn(64, 256, requires_grad=True)
    w, b = torch.ones(256, requires_grad=True), torch.zeros(256, requires_grad=True)
    assert saved_bytes(lambda: tgt.layer_norm(x, (256,), w, b)) == x.numel() * 4 + 2 * 64 * 4 + 2 * 256 * 4  # input, fp32 mean and rstd per row, w, b


def test_parameter_gradients_are_the_same_for_any_thread_count():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1000, 96, generator=g)
    dy = torch.randn(1000, 96, generator=g)
    assert_gradients_do_not_depend_on_threads(lambda a, w, b: tgt.layer_norm(a, (96,), w, b),
                                              [x, torch.ones(96), torch.zeros(96)], dy)


def test_falls_back_to_torch():
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(tgt.layer_norm(x, (8,)), F.layer_norm(x, (8,)), rtol=0, atol=0)
    y = torch.randn(4, 8)
    with pytest.raises(RuntimeError):
        tgt.layer_norm(y, (4,))  # torch's own message for a shape that is not trailing
    # a negative eps (the vendor refuses it) and an fp16 weight with an fp32 input: torch decides
    torch.testing.assert_close(tgt.layer_norm(y, (8,), eps=-1e-3), F.layer_norm(y, (8,), eps=-1e-3), rtol=0, atol=0,
                               equal_nan=True)
    w16 = torch.ones(8, dtype=torch.float16)
    try:
        want = F.layer_norm(y, (8,), w16)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            tgt.layer_norm(y, (8,), w16)
    else:
        torch.testing.assert_close(tgt.layer_norm(y, (8,), w16), want, rtol=0, atol=0)
    assert tgt.layer_norm(torch.randn(0, 8), (8,)).shape == (0, 8)


def test_nn_layer_norm_is_a_torch_layer_norm_with_the_same_state():
    torch.manual_seed(0)
    for kwargs in ({}, {"bias": False}, {"elementwise_affine": False}):
        ours, theirs = tgt.nn.LayerNorm(32, eps=1e-6, **kwargs), torch.nn.LayerNorm(32, eps=1e-6, **kwargs)
        assert isinstance(ours, torch.nn.LayerNorm)
        with torch.no_grad():
            for p in theirs.parameters():
                p.uniform_(0.5, 1.5)
        ours.load_state_dict(theirs.state_dict())
        assert ours.state_dict().keys() == theirs.state_dict().keys()
        x = torch.randn(4, 7, 32, requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        y, yr = ours(x), theirs(xr)
        assert type(y.grad_fn).__name__ == "TilegradLayerNormBackward"
        torch.testing.assert_close(y, yr, rtol=1e-5, atol=1e-5)
        y.sum().backward()
        yr.sum().backward()
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)


def _opcheck_cases():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 16, generator=g)
    w, b = torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)
    mean, rstd = x.mean(-1, keepdim=True), torch.rand(6, 1, generator=g) + 0.5
    return [
        ("layer_norm", (x.clone().requires_grad_(), [16], w.clone().requires_grad_(), b.clone().requires_grad_(),
                        1e-5)),
        ("layer_norm", (x.t().contiguous().t(), [16], None, None, 1e-5)),
        ("layer_norm", (x.view(2, 3, 16).requires_grad_(), [3, 16], None, None, 1e-5)),
        ("layer_norm_backward", (torch.randn(6, 16, generator=g), x, [16], mean, rstd, w, [True, True, True])),
        ("layer_norm_backward", (torch.randn(6, 16, generator=g), x, [16], mean, rstd, None, [True, False, True])),
    ]


@pytest.mark.parametrize("index", range(len(_opcheck_cases())))
def test_opcheck(index):
    name, args = _opcheck_cases()[index]
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


@pytest.mark.parametrize("bias", [True, False])
def test_compile_fullgraph_gives_eager_results(bias):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 6, 32, generator=g, requires_grad=True)
    w = torch.rand(32, generator=g, requires_grad=True)
    b = torch.randn(32, generator=g, requires_grad=True) if bias else None
    assert_compiled_matches_eager(lambda x, w, b: (tgt.layer_norm(x, (32,), w, b, 1e-5) ** 2).sum(), [x, w, b])


def test_second_derivatives_are_torchs():
    g = torch.Generator().manual_seed(9)
    x, w, b = torch.randn(5, 16, generator=g), torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)
    assert_second_derivatives_match(lambda a, c, d: tgt.layer_norm(a, (16,), c, d),
                                    lambda a, c, d: F.layer_norm(a, (16,), c, d), [x, w, b])


def test_torch_func_grad():
    g = torch.Generator().manual_seed(10)
    x, w = torch.randn(3, 8, generator=g), torch.rand(8, generator=g) + 0.5
    got = torch.func.grad(lambda a: tgt.layer_norm(a, (8,), w).pow(2).sum())(x)
    want = torch.func.grad(lambda a: F.layer_norm(a, (8,), w).pow(2).sum())(x)
    torch.testing.assert_close(got, want)
