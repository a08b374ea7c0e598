"""tilegrad.torch.add_rms_norm (aclnnAddRmsNorm + tilegrad's fused backward): forward and the gradients
of x1, x2 and the weight against float64 written from the specification (section 14) and against
torch's ``x1 + x2`` then ``F.rms_norm``, on the eager kernel node and on the composite (each forced
through the router), opcheck of both ops, torch.compile(fullgraph=True), second derivatives and
torch.func, what autograd saves, thread-count independence, torch's fallback and the errors of bad
input."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _add_rms_norm  # noqa: E402
from tilegrad.torch._eager import CROSSOVER, Path  # noqa: E402
from reference.torch_compare import assert_matches, autograd_node_names, saved_bytes  # noqa: E402  (conftest.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
DTYPES = [F32, BF16, F16]
DTYPE_IDS = ["fp32", "bf16", "fp16"]
# (x1 shape, weight dims): one and two normalized dims, an odd row length
SHAPES = [((3, 5, 64), 1), ((2, 3, 4, 16), 2), ((7, 33), 1)]
EPS = 1e-5


@pytest.fixture(params=[Path.KERNEL, Path.COMPOSITE], ids=["kernel", "composite"])
def path(request, monkeypatch):
    """Every call of the test takes this path, whatever its size (as tests/torch/test_routing.py forces it)."""
    monkeypatch.setattr(_add_rms_norm, "route", lambda *args, **kwargs: request.param)
    return request.param


def _inputs(shape, k, dtype, seed=0):
    """x1, x2 (scale 2), weight (around 1), dy and dresidual (the gradients of y and x_out), rounded to dtype."""
    g = torch.Generator().manual_seed(seed)

    def r(*s, scale=1.0, offset=0.0):
        return (torch.randn(*s, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    return r(*shape, scale=2.0), r(*shape, scale=2.0), r(*shape[-k:], scale=0.5, offset=1.0), r(*shape), r(*shape)


def _leaves(*tensors):
    return [t.clone().requires_grad_() for t in tensors]


def _run(fn, x1, x2, w, dy, dres):
    """y, x_out and the gradients of x1, x2 and w of ``sum(y * dy) + sum(x_out * dres)`` (the next
    sub-block reads y, the residual path reads x_out)."""
    a, b, c = _leaves(x1, x2, w)
    y, x_out = fn(a, b, c)
    torch.autograd.backward((y, x_out), (dy, dres))
    return y.detach(), x_out.detach(), a.grad, b.grad, c.grad


def _reference64(x1, x2, w, dy, dres, eps=EPS):
    """Specification section 14 in float64: x_out = x1 + x2 rounded once to the dtype; y = x_out *
    rstd * w with rstd = 1 / sqrt(mean(x_out^2) + eps) over w's dims; the gradient of the sum (that of
    x1 and of x2) = the normalisation's + the residual path's."""
    x_out = (x1.double() + x2.double()).to(x1.dtype)
    s = x_out.double().requires_grad_()
    w64 = w.double().requires_grad_()
    dims = tuple(range(s.dim() - w.dim(), s.dim()))
    rstd = torch.rsqrt(s.pow(2).mean(dims, keepdim=True) + eps)
    y = s * rstd * w64
    torch.autograd.backward((y, s), (dy.double(), dres.double()))
    return y.detach(), x_out, s.grad, w64.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape,k", SHAPES)
def test_matches_float64(path, dtype, shape, k):
    x1, x2, w, dy, dres = _inputs(shape, k, dtype, seed=1)
    y, x_out, dx1, dx2, dw = _run(lambda a, b, c: tgt.add_rms_norm(a, b, c, EPS), x1, x2, w, dy, dres)
    want_y, want_x_out, want_dx, want_dw = _reference64(x1, x2, w, dy, dres)
    assert y.dtype == x_out.dtype == dx1.dtype == dx2.dtype == dw.dtype == dtype
    assert torch.equal(x_out, want_x_out)  # the exact sum rounded once
    assert_matches(y, want_y, dtype, "y")
    assert_matches(dx1, want_dx, dtype, "dx1", factor=2)
    assert torch.equal(dx1, dx2)  # one gradient for both inputs
    assert_matches(dw, want_dw, dtype, "dweight", factor=2)


def _ulp(t):
    """The spacing of t's dtype at each value of t (its subnormal spacing near zero)."""
    bits = {BF16: 7, F16: 10}[t.dtype]
    smallest = {BF16: 2.0 ** -133, F16: 2.0 ** -24}[t.dtype]
    _, exponent = torch.frexp(t.double())
    return torch.clamp(torch.ldexp(torch.ones_like(t, dtype=torch.float64), exponent - 1 - bits), min=smallest)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_matches_torch_add_then_rms_norm(path, dtype):
    """Hugging Face's ``h = residual + x; y = norm(h)`` as torch computes it: the same sum; y equal in
    float32 (to float32 rounding), within one ulp in 16 bits (torch rounds ``x * rstd`` before the
    weight); the gradients of float32 the same to float32 rounding."""
    x1, x2, w, dy, dres = _inputs((6, 10, 96), 1, dtype, seed=2)

    def theirs(a, b, c):
        h = a + b
        return F.rms_norm(h, c.shape, c, EPS), h

    y, x_out, dx1, dx2, dw = _run(lambda a, b, c: tgt.add_rms_norm(a, b, c, EPS), x1, x2, w, dy, dres)
    want_y, want_x_out, want_dx1, want_dx2, want_dw = _run(theirs, x1, x2, w, dy, dres)
    assert torch.equal(x_out, want_x_out)
    if dtype == F32:
        torch.testing.assert_close(y, want_y, rtol=1e-6, atol=1e-6)
        for got, want in ((dx1, want_dx1), (dx2, want_dx2), (dw, want_dw)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:
        assert ((y.double() - want_y.double()).abs() <= _ulp(want_y)).all()


def test_only_the_output_used_gets_a_gradient(path):
    """y alone (the residual stream not read again): the normalisation's gradient; x_out alone: its
    gradient passes to both inputs unchanged, the weight gets none."""
    x1, x2, w, dy, dres = _inputs((4, 32), 1, F32, seed=3)
    _, _, want_dx, want_dw = _reference64(x1, x2, w, dy, torch.zeros_like(dres))
    a, b, c = _leaves(x1, x2, w)
    tgt.add_rms_norm(a, b, c, EPS)[0].backward(dy)
    assert_matches(a.grad, want_dx, F32, "dx1 of y alone")
    assert_matches(c.grad, want_dw, F32, "dweight of y alone")
    a, b, c = _leaves(x1, x2, w)
    tgt.add_rms_norm(a, b, c, EPS)[1].backward(dres)
    assert torch.equal(a.grad, dres) and torch.equal(b.grad, dres)
    assert c.grad is None or not c.grad.any()


def test_inputs_that_need_no_gradient_get_none(path):
    x1, x2, w, dy, dres = _inputs((4, 32), 1, F32, seed=4)
    a = x1.clone().requires_grad_()
    y, x_out = tgt.add_rms_norm(a, x2, w, EPS)
    torch.autograd.backward((y, x_out), (dy, dres))
    _, _, want_dx, _ = _reference64(x1, x2, w, dy, dres)
    assert_matches(a.grad, want_dx, F32, "dx1")
    assert not x2.requires_grad and x2.grad is None and w.grad is None


def test_eager_call_takes_tilegrads_node_and_composite_below_the_crossover(monkeypatch):
    x1, x2, w = _leaves(*_inputs((4, 64), 1, BF16, seed=5)[:3])
    monkeypatch.setitem(CROSSOVER, "add_rms_norm", {})
    assert "TilegradAddRmsNormBackward" in autograd_node_names(tgt.add_rms_norm(x1, x2, w)[0])
    monkeypatch.setitem(CROSSOVER, "add_rms_norm", {BF16: 1 << 20})
    assert not any(n.startswith("Tilegrad") for n in autograd_node_names(tgt.add_rms_norm(x1, x2, w)[0]))


def test_saves_only_the_sum_row_rstd_and_weight(monkeypatch):
    monkeypatch.setitem(CROSSOVER, "add_rms_norm", {})
    x1, x2, w = _leaves(*_inputs((64, 256), 1, F32, seed=6)[:3])
    assert saved_bytes(lambda: tgt.add_rms_norm(x1, x2, w)) == x1.numel() * 4 + 64 * 4 + w.numel() * 4


def test_results_are_the_same_for_any_thread_count(torch_threads, monkeypatch):
    monkeypatch.setitem(CROSSOVER, "add_rms_norm", {})
    x1, x2, w, dy, dres = _inputs((1000, 96), 1, F32, seed=7)
    results = []
    for threads in (1, 2, 3):
        torch_threads(threads)
        results.append(_run(lambda a, b, c: tgt.add_rms_norm(a, b, c), x1, x2, w, dy, dres))
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


def test_falls_back_to_torch_for_float64():
    x1, x2, w, dy, dres = _inputs((4, 8), 1, torch.float64, seed=8)
    y, x_out = tgt.add_rms_norm(x1, x2, w, EPS)
    assert torch.equal(x_out, x1 + x2)
    assert torch.equal(y, F.rms_norm(x1 + x2, (8,), w, EPS))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_empty_input(dtype):
    x = torch.zeros(0, 8, dtype=dtype, requires_grad=True)
    w = torch.ones(8, dtype=dtype, requires_grad=True)
    y, x_out = tgt.add_rms_norm(x, x, w)
    assert y.shape == x_out.shape == (0, 8)
    y.sum().backward()
    assert x.grad.shape == (0, 8) and torch.equal(w.grad, torch.zeros(8, dtype=dtype))


@pytest.mark.parametrize("args,error,message", [
    (lambda x, w: (x, x[:, :16], w), ValueError, r"add_rms_norm: x2 shape must equal x1 shape \[4, 32\] \(no "
                                                 r"broadcasting\), got \[4, 16\]"),
    (lambda x, w: (x, x[:1], w), ValueError, r"x2 shape must equal x1 shape \[4, 32\] .*got \[1, 32\]"),
    (lambda x, w: (x, x, w[:16]), ValueError, r"add_rms_norm: weight shape must be trailing dims of x1 shape "
                                              r"\[4, 32\], got \[16\]"),
    (lambda x, w: (x, x, x.new_ones(2, 4, 32)), ValueError, r"weight shape must be trailing dims .*got \[2, 4, 32\]"),
    (lambda x, w: (x, x.double(), w), TypeError, r"add_rms_norm: x2 dtype must be x1's \(torch.float32\), got "
                                                 r"torch.float64"),
    (lambda x, w: (x, x, w.bfloat16()), TypeError, r"add_rms_norm: weight dtype must be x1's \(torch.float32\), "
                                                   r"got torch.bfloat16"),
    (lambda x, w: (x, x.numpy(), w), TypeError, r"add_rms_norm: x2 must be a torch.Tensor, got ndarray"),
])
def test_bad_input_raises_naming_the_argument(args, error, message):
    x, w = torch.randn(4, 32), torch.ones(32)
    with pytest.raises(error, match=message):
        tgt.add_rms_norm(*args(x, w))


@pytest.mark.parametrize("eps,error", [(-1e-6, ValueError), (float("nan"), ValueError), ("1e-6", TypeError)])
def test_bad_eps_raises(eps, error):
    x, w = torch.randn(4, 32), torch.ones(32)
    with pytest.raises(error, match=r"tilegrad.torch.add_rms_norm: eps must be"):
        tgt.add_rms_norm(x, x, w, eps)


# ----------------------------------------------------------------------------------------------
# torch.library: opcheck and torch.compile


def _opcheck_cases():
    g = torch.Generator().manual_seed(9)
    x1, x2 = torch.randn(6, 16, generator=g), torch.randn(6, 16, generator=g)
    w = torch.rand(16, generator=g) + 0.5
    rstd = torch.rand(6, 1, generator=g) + 0.5
    dy = torch.randn(6, 16, generator=g)
    return [
        ("add_rms_norm", (x1.clone().requires_grad_(), x2.clone().requires_grad_(), w.clone().requires_grad_(),
                          1e-6)),
        ("add_rms_norm", (x1.t().contiguous().t(), x2, w, 1e-6)),
        ("add_rms_norm", (torch.randn(2, 3, 8, generator=g).to(BF16), torch.randn(2, 3, 8, generator=g).to(BF16),
                          torch.rand(3, 8, generator=g).to(BF16), 1e-5)),
        ("add_rms_norm_backward", (dy, x1, rstd, w, x2)),
        ("add_rms_norm_backward", (dy, x1, rstd, w, None)),
    ]


@pytest.mark.parametrize("index", range(len(_opcheck_cases())))
def test_opcheck(index):
    name, args = _opcheck_cases()[index]
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


def test_compile_fullgraph_gives_eager_results():
    """A residual block as Hugging Face writes it, compiled whole: tilegrad's op in the graph, eager's
    values and gradients."""
    torch._dynamo.reset()
    x1, x2, w, dy, _ = _inputs((2, 6, 32), 1, F32, seed=10)

    def block(residual, x, weight):
        y, h = tgt.add_rms_norm(residual, x, weight, 1e-6)
        return (y * dy).sum() + h.square().sum()

    leaves = _leaves(x1, x2, w)
    eager = block(*leaves)
    eager.backward()
    want = [t.grad for t in leaves]
    traced = []

    def backend(gm, example_inputs):  # aot_eager, noting what dynamo traced
        traced.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    leaves = _leaves(x1, x2, w)
    try:
        compiled = torch.compile(block, fullgraph=True, backend=backend)(*leaves)
    finally:
        torch._dynamo.reset()
    compiled.backward()
    assert any(n.startswith("tilegrad.add_rms_norm") for n in traced), traced
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close([t.grad for t in leaves], want)


# ----------------------------------------------------------------------------------------------
# second derivatives and torch.func: torch's values


def test_second_derivatives_are_torchs(path):
    """An input-gradient penalty through both outputs: the backward recomputes through the composite."""
    x1, x2, w, _, _ = _inputs((5, 16), 1, F32, seed=11)

    def penalty(fn, inputs):
        y, h = fn(*inputs)
        (g,) = torch.autograd.grad(y.pow(2).sum() + (h * y).sum(), inputs[0], create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), inputs)

    got = penalty(lambda a, b, c: tgt.add_rms_norm(a, b, c, 1e-6), _leaves(x1, x2, w))
    want = penalty(lambda a, b, c: (F.rms_norm(a + b, (16,), c, 1e-6), a + b),
                   [t.double().requires_grad_() for t in (x1, x2, w)])
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)


def test_torch_func_grad_and_vmap():
    x1, x2, w, _, _ = _inputs((3, 8), 1, F32, seed=12)
    got = torch.func.grad(lambda a, b: tgt.add_rms_norm(a, b, w)[0].pow(2).sum(), argnums=(0, 1))(x1, x2)
    want = torch.func.grad(lambda a, b: F.rms_norm(a + b, (8,), w, 1e-6).pow(2).sum(), argnums=(0, 1))(x1, x2)
    torch.testing.assert_close(got, want)
    y, h = torch.func.vmap(lambda a, b: tgt.add_rms_norm(a, b, w))(x1, x2)
    torch.testing.assert_close(y, F.rms_norm(x1 + x2, (8,), w, 1e-6))
    assert torch.equal(h, x1 + x2)


def test_exported_from_the_package():
    assert "add_rms_norm" in tgt.__all__ and tgt.add_rms_norm is _add_rms_norm.add_rms_norm
