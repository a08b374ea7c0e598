"""tilegrad.torch's GELU family (gelu, gelu_mul, geglu, tgt.nn.GELU) and rms_norm's weight_offset
(Gemma's RMSNorm) against torch's own functions (F.gelu, F.gelu(gate, approximate=...) * up) and
float64 references: forward and every gradient in fp32 / bf16 / fp16 on both routes (the eager kernel
node and the composite), opcheck, torch.compile(fullgraph=True), second derivatives, torch.func,
what autograd saves and bad arguments."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _gelu, _rms_norm  # noqa: E402
from tilegrad.torch._eager import Path  # noqa: E402
from reference.torch_compare import (assert_compiled_matches_eager, assert_second_derivatives_match,  # noqa: E402
                                     saved_tensors)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
DTYPE_IDS = ["f32", "bf16", "f16"]
FORMS = ["none", "tanh"]
# error bound against the float64 reference, relative to the reference's largest magnitude: fp32 a few
# ulp; 16-bit one rounding of the result (torch's own 16-bit values differ from it by one rounding too)
TOL = {torch.float32: 4e-6, torch.bfloat16: 2 ** -8, torch.float16: 2 ** -11}


@pytest.fixture(params=[Path.KERNEL, Path.COMPOSITE], ids=["kernel", "composite"])
def route(request, monkeypatch):
    """Each test runs on both routes an eager call can take, forced through the family's router."""
    monkeypatch.setattr(_gelu, "route", lambda *a, **k: request.param)
    monkeypatch.setattr(_rms_norm, "route", lambda *a, **k: request.param)
    return request.param


def _assert_close(got, want, dtype):
    got, want = got.double(), want.double()
    bound = TOL[dtype] * max(1.0, want.abs().max().item())
    err = (got - want).abs().max().item()
    assert err <= bound, f"max error {err} > {bound}"


def _leaves(dtype, *shapes, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*s, generator=g) * scale).to(dtype).requires_grad_() for s in shapes]


def _run(fn, inputs, upstream):
    out = fn(*inputs)
    grads = torch.autograd.grad(out, inputs, upstream)
    return out.detach(), grads


def _float64_twin(inputs):
    return [t.detach().double().requires_grad_() for t in inputs]


def _node_names(t):
    return type(t.grad_fn).__name__


# ----------------------------------------------------------------------------------------------
# values against float64 and torch, both routes


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gelu_matches_float64_and_torch(route, dtype, form):
    (x,) = _leaves(dtype, (7, 130))
    dy = torch.randn(7, 130, generator=torch.Generator().manual_seed(1)).to(dtype)
    out, (dx,) = _run(lambda a: tgt.gelu(a, approximate=form), [x], dy)
    assert out.dtype == dx.dtype == dtype
    ref_out, (ref_dx,) = _run(lambda a: F.gelu(a, approximate=form), _float64_twin([x]), dy.double())
    _assert_close(out, ref_out, dtype)
    _assert_close(dx, ref_dx, dtype)
    torch_out, (torch_dx,) = _run(lambda a: F.gelu(a, approximate=form), [x], dy)
    torch.testing.assert_close(out, torch_out, rtol=2 * TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(dx, torch_dx, rtol=4 * TOL[dtype], atol=2 * TOL[dtype])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gelu_mul_matches_float64_and_torch(route, dtype, form):
    gate, up = _leaves(dtype, (5, 3, 67), (5, 3, 67))
    dy = torch.randn(5, 3, 67, generator=torch.Generator().manual_seed(2)).to(dtype)

    def ours(g, u):
        return tgt.gelu_mul(g, u, approximate=form)

    def torchs(g, u):
        return F.gelu(g, approximate=form) * u

    out, (dg, du) = _run(ours, [gate, up], dy)
    assert out.dtype == dg.dtype == du.dtype == dtype
    ref_out, (ref_dg, ref_du) = _run(torchs, _float64_twin([gate, up]), dy.double())
    _assert_close(out, ref_out, dtype)
    _assert_close(dg, ref_dg, dtype)
    _assert_close(du, ref_du, dtype)
    torch_out, torch_grads = _run(torchs, [gate, up], dy)
    # torch rounds gelu(gate) to 16 bits before the product: one rounding more than tilegrad
    torch.testing.assert_close(out, torch_out, rtol=4 * TOL[dtype], atol=4 * TOL[dtype])
    for a, b in zip((dg, du), torch_grads):
        torch.testing.assert_close(a, b, rtol=8 * TOL[dtype], atol=8 * TOL[dtype])


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_geglu_is_gelu_mul_of_the_halves(route, dim):
    (x,) = _leaves(torch.float32, (6, 8, 10), seed=3)
    out = tgt.geglu(x, dim)
    gate, up = x.detach().double().chunk(2, dim)
    _assert_close(out, F.gelu(gate, approximate="tanh") * up, torch.float32)
    out.sum().backward()
    x64 = x.detach().double().requires_grad_()
    a, b = x64.chunk(2, dim)
    (F.gelu(a, approximate="tanh") * b).sum().backward()
    _assert_close(x.grad, x64.grad, torch.float32)


def test_kernel_route_uses_tilegrads_nodes_and_saves_only_the_inputs(monkeypatch):
    monkeypatch.setattr(_gelu, "route", lambda *a, **k: Path.KERNEL)
    gate, up = _leaves(torch.float32, (4, 16), (4, 16))
    assert _node_names(tgt.gelu_mul(gate, up)) == "TilegradGeluMulBackward"
    assert _node_names(tgt.gelu(gate)) == "TilegradGeluBackward"
    saved = saved_tensors(lambda: tgt.gelu_mul(gate, up))
    assert len(saved) == 2 and saved[0] is gate and saved[1] is up


def test_defaults_are_torchs_and_gemmas():
    """tgt.gelu defaults to erf (F.gelu's default); gelu_mul / geglu to tanh (Gemma's gelu_pytorch_tanh)."""
    (x,) = _leaves(torch.float32, (3, 8), seed=4)
    torch.testing.assert_close(tgt.gelu(x), F.gelu(x))
    torch.testing.assert_close(tgt.gelu_mul(x, x), F.gelu(x, approximate="tanh") * x)
    torch.testing.assert_close(tgt.geglu(x), F.gelu(x[:, :4], approximate="tanh") * x[:, 4:])


def test_unsupported_inputs_run_torchs_function():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    out = tgt.gelu_mul(x, x, "none")
    assert out.dtype == torch.float64 and not _node_names(out).startswith("Tilegrad")
    torch.testing.assert_close(out, F.gelu(x) * x)
    torch.testing.assert_close(tgt.gelu(x, "tanh"), F.gelu(x, approximate="tanh"))
    y = torch.randn(4, 6)
    torch.testing.assert_close(tgt.gelu_mul(y, y[:1]), F.gelu(y, approximate="tanh") * y[:1])  # broadcast


def test_bad_arguments_name_tilegrad_and_the_value():
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match=r"tilegrad.torch.gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        tgt.gelu(x, approximate="erf")
    with pytest.raises(ValueError, match="tilegrad.torch.gelu_mul: approximate"):
        tgt.gelu_mul(x, x, "exact")
    with pytest.raises(ValueError, match=r"tilegrad.torch.geglu: input.shape\[0\] must be even, got 5"):
        tgt.geglu(torch.randn(5, 4), 0)
    with pytest.raises(IndexError, match=r"tilegrad.torch.geglu: dim must be in \[-2, 1\], got 2"):
        tgt.geglu(x, 2)


def test_results_do_not_depend_on_the_thread_count(torch_threads, monkeypatch):
    monkeypatch.setattr(_gelu, "route", lambda *a, **k: Path.KERNEL)
    gate, up = _leaves(torch.bfloat16, (64, 1000), (64, 1000), seed=5)
    results = []
    for n in (1, 2):
        torch_threads(n)
        out, grads = _run(tgt.gelu_mul, [gate, up], torch.ones(64, 1000, dtype=torch.bfloat16))
        results.append((out, *grads))
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_nn_gelu_is_a_torch_gelu():
    for form in FORMS:
        module = tgt.nn.GELU(approximate=form)
        assert isinstance(module, torch.nn.GELU) and module.approximate == form
        (x,) = _leaves(torch.float32, (3, 40), seed=6)
        torch.testing.assert_close(module(x), F.gelu(x, approximate=form))
        torch.testing.assert_close(torch.jit.script(module)(x), F.gelu(x, approximate=form))


# ----------------------------------------------------------------------------------------------
# rms_norm's weight_offset: Gemma's RMSNorm


def _gemma_rms_norm(x, weight, eps):
    """transformers' own GemmaRMSNorm (fp32 x * rsqrt(mean(x^2) + eps) * (1 + w.float()), rounded once to
    x's dtype) with ``weight``'s values: (its output, its weight Parameter)."""
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    module = GemmaRMSNorm(weight.shape[-1], eps=eps).to(weight.dtype)
    with torch.no_grad():
        module.weight.copy_(weight)
    return module(x), module.weight


@pytest.mark.parametrize("wdtype", [None, torch.float32], ids=["same", "fp32-weight"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_weight_offset_is_gemmas_rms_norm(route, dtype, wdtype):
    pytest.importorskip("transformers")
    wdtype = wdtype or dtype
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(6, 48, generator=g) * 2).to(dtype).requires_grad_()
    w = (torch.randn(48, generator=g) * 0.1).to(wdtype).requires_grad_()
    dy = torch.randn(6, 48, generator=g).to(dtype)
    out = tgt.rms_norm(x, (48,), w, 1e-6, weight_offset=1.0)
    dx, dw = torch.autograd.grad(out, (x, w), dy)
    assert out.dtype == dx.dtype == dtype and dw.dtype == wdtype
    x_hf = x.detach().clone().requires_grad_()
    hf_out, hf_w = _gemma_rms_norm(x_hf, w.detach().clone().requires_grad_(), 1e-6)
    hf_dx, hf_dw = torch.autograd.grad(hf_out, (x_hf, hf_w), dy)
    # the same float32 computation rounded once: fp32 to float32 reductions' order, 16-bit to one ulp
    tol = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dtype]
    torch.testing.assert_close(out, hf_out, rtol=tol, atol=tol)
    torch.testing.assert_close(dx, hf_dx, rtol=tol, atol=tol)
    torch.testing.assert_close(dw.float(), hf_dw.float(), rtol=max(tol, 1e-4), atol=max(tol, 1e-4) * 6)
    # and against the float64 formula
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + w64)
    ref_dx, ref_dw = torch.autograd.grad(y64, (x64, w64), dy.double())
    _assert_close(out, y64.detach(), dtype)
    _assert_close(dx, ref_dx, dtype)
    _assert_close(dw, ref_dw, wdtype if wdtype != torch.float32 else dtype)


def test_weight_offset_fallback_and_errors():
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64) * 0.1
    y = tgt.rms_norm(x, (8,), w, 1e-6, weight_offset=1.0)
    torch.testing.assert_close(y, F.rms_norm(x, (8,), 1 + w, 1e-6))
    with pytest.raises(ValueError, match=r"tilegrad.torch.rms_norm: weight_offset=1.0 needs a weight, got None"):
        tgt.rms_norm(x, (8,), None, weight_offset=1.0)
    with pytest.raises(TypeError, match="tilegrad.torch.rms_norm: weight_offset must be a float, got '1'"):
        tgt.rms_norm(x, (8,), w, weight_offset="1")


# ----------------------------------------------------------------------------------------------
# torch.library: opcheck, torch.compile, second derivatives, torch.func


def _opcheck_cases():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(6, 16, generator=g)
    gate, up = torch.randn(5, 12, generator=g), torch.randn(12, 5, generator=g).t()
    w = torch.randn(16, generator=g) * 0.1
    rstd = torch.rand(6, 1, generator=g) + 0.5
    return [
        ("gelu", (x.clone().requires_grad_(), "none")),
        ("gelu", (x.t(), "tanh")),
        ("gelu_backward", (torch.randn(6, 16, generator=g), x, "tanh")),
        ("gelu_mul", (gate.clone().requires_grad_(), up.clone().requires_grad_(), "tanh")),
        ("gelu_mul", (gate, up, "none")),
        ("gelu_mul_backward", (torch.randn(5, 12, generator=g), gate, up, "none")),
        ("rms_norm", (x.clone().requires_grad_(), w.clone().requires_grad_(), 1e-6, 1.0)),
        ("rms_norm_grad", (torch.randn(6, 16, generator=g), x, rstd, w, 1.0)),
    ]


@pytest.mark.parametrize("index", range(len(_opcheck_cases())))
def test_opcheck(index):
    name, args = _opcheck_cases()[index]
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


def test_compile_fullgraph_gives_eager_results():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 6, 32, generator=g, requires_grad=True)
    w = (torch.randn(32, generator=g) * 0.1).requires_grad_()

    def block(x, w):
        h = tgt.rms_norm(x, (32,), w, 1e-6, weight_offset=1.0)
        return (tgt.gelu_mul(h, x) + tgt.gelu(h) + tgt.geglu(h, -1, "none").repeat(1, 1, 2)).sum()

    assert_compiled_matches_eager(block, [x, w])


@pytest.mark.parametrize("form", FORMS)
def test_second_derivatives_are_torchs(form, monkeypatch):
    monkeypatch.setattr(_gelu, "route", lambda *a, **k: Path.KERNEL)
    gate, up = _leaves(torch.float32, (4, 12), (4, 12), seed=10, scale=1.0)
    assert_second_derivatives_match(lambda a, b: tgt.gelu_mul(a, b, form),
                                    lambda a, b: F.gelu(a, approximate=form) * b, [gate, up])
    assert_second_derivatives_match(lambda a: tgt.gelu(a, form), lambda a: F.gelu(a, approximate=form), [gate])


def test_torch_func_grad_and_vmap():
    (x,) = _leaves(torch.float32, (3, 8), seed=11)
    x = x.detach()
    got = torch.func.grad(lambda a: tgt.gelu_mul(a, a).pow(2).sum())(x)
    want = torch.func.grad(lambda a: (F.gelu(a, approximate="tanh") * a).pow(2).sum())(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.func.vmap(tgt.gelu)(x), F.gelu(x))
