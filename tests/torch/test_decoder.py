"""tilegrad.torch's decoder-block functions (rms_norm, silu_mul, swiglu, rotary_position_embedding,
apply_rotary_pos_emb) and tgt.nn.RMSNorm against float64 torch references (forward and every
gradient), opcheck on contiguous, transposed and broadcast inputs, torch.compile(fullgraph=True),
what autograd saves, thread-count independence and the fallbacks."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _rope  # noqa: E402
from tilegrad.torch._eager import CROSSOVER  # noqa: E402
from reference.torch_compare import (assert_compiled_matches_eager, assert_gradients_do_not_depend_on_threads,  # noqa: E402
                                     assert_second_derivatives_match, saved_bytes, saved_tensors)

pytestmark = pytest.mark.usefixtures("one_torch_thread", "kernels_at_every_size")
  # tests/torch/conftest.py


def test_below_the_crossover_torchs_composite_runs(monkeypatch):
    for op in ("rms_norm", "silu_mul", "swiglu"):
        monkeypatch.setitem(CROSSOVER, op, {torch.float32: 1 << 20})
    x = torch.randn(4, 32, requires_grad=True)
    for out in (tgt.rms_norm(x, (32,)), tgt.silu_mul(x, x), tgt.swiglu(x)):
        assert not type(out.grad_fn).__name__.startswith("Tilegrad")
    monkeypatch.setitem(CROSSOVER, "silu_mul", {})
    assert type(tgt.silu_mul(x, x).grad_fn).__name__ == "TilegradSiluMulBackward"

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# forward / gradient tolerance against float64, relative to the reference's largest magnitude
TOL = {torch.float32: 2e-6, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}


def assert_close_to(got, want, dtype, scale=1.0):
    """Each element within TOL[dtype] * max|want| (plus one output rounding) of the float64 reference."""
    got, want = got.double(), want.double()
    bound = scale * TOL[dtype] * max(1.0, want.abs().max().item())
    err = (got - want).abs().max().item()
    assert err <= bound, f"max error {err} > {bound}"


def leaf(t, dtype):
    return t.to(dtype).detach().requires_grad_(True)


def grads_of(fn, inputs, upstream):
    out = fn(*inputs)
    out.backward(upstream)
    return out.detach(), [None if t is None or t.grad is None else t.grad.detach() for t in inputs]


# ----------------------------------------------------------------------------------------------
# RMSNorm


# (x dtype, weight dtype or None): the vendor's pairs, fp32 weights with 16-bit inputs among them
RMS_NORM_DTYPES = [(d, d) for d in DTYPES] + [(d, torch.float32) for d in DTYPES[1:]] + [(d, None) for d in DTYPES]


@pytest.mark.parametrize("dtype,wdtype", RMS_NORM_DTYPES)
@pytest.mark.parametrize("normalized", [(64,), (5, 64)])
def test_rms_norm_matches_float64(dtype, wdtype, normalized):
    g = torch.Generator().manual_seed(1)
    x64 = torch.randn(3, 5, 64, generator=g, dtype=torch.float64) * 3
    w64 = 1 + 0.5 * torch.randn(normalized, generator=g, dtype=torch.float64)
    dy64 = torch.randn(3, 5, 64, generator=g, dtype=torch.float64)
    x, w = leaf(x64, dtype), (None if wdtype is None else leaf(w64, wdtype))
    eps = 1e-5
    y, (dx, dw) = grads_of(lambda a, b: tgt.rms_norm(a, normalized, b, eps), [x, w], dy64.to(dtype))
    xr, wr = leaf(x64, torch.float64), (None if w is None else leaf(w.detach().double(), torch.float64))
    yr, (dxr, dwr) = grads_of(lambda a, b: F.rms_norm(a, normalized, b, eps), [xr.detach().to(dtype).double()
                                                                               .requires_grad_(), wr],
                              dy64.to(dtype).double())
    assert y.dtype == dtype and y.shape == x.shape
    assert_close_to(y, yr, dtype)
    assert_close_to(dx, dxr, dtype, scale=4)
    if w is not None:
        assert dw.dtype == wdtype
        assert_close_to(dw, dwr, torch.float32 if wdtype == torch.float32 else dtype, scale=4)


def test_rms_norm_default_eps_is_torchs():
    x = torch.full((2, 8), 1e-4)
    torch.testing.assert_close(tgt.rms_norm(x, (8,)), F.rms_norm(x, (8,)), rtol=1e-6, atol=0)


def test_rms_norm_saves_only_input_and_row_rstd():
    x = torch.randn(64, 256, requires_grad=True)
    w = torch.ones(256, requires_grad=True)
    assert saved_bytes(lambda: tgt.rms_norm(x, (256,), w)) == x.numel() * 4 + 64 * 4 + w.numel() * 4  # input, fp32 rstd per row, weight (a Parameter)


def test_rms_norm_weight_gradient_is_the_same_for_any_thread_count():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1000, 96, generator=g)
    dy = torch.randn(1000, 96, generator=g)
    assert_gradients_do_not_depend_on_threads(lambda a, w: tgt.rms_norm(a, (96,), w), [x, torch.ones(96)], dy)


def test_rms_norm_falls_back_for_float64_and_mismatched_shapes():
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(tgt.rms_norm(x, (8,)), F.rms_norm(x, (8,)), rtol=0, atol=0)
    y = torch.randn(4, 8)
    with pytest.raises(RuntimeError):  # torch's own message for a shape that is not trailing
        tgt.rms_norm(y, (4,))


def test_nn_rms_norm_is_a_torch_rms_norm_with_the_same_state():
    torch.manual_seed(0)
    ours, theirs = tgt.nn.RMSNorm(32, eps=1e-6), torch.nn.RMSNorm(32, eps=1e-6)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
    ours.load_state_dict(theirs.state_dict())
    assert isinstance(ours, torch.nn.RMSNorm) and ours.state_dict().keys() == theirs.state_dict().keys()
    x = torch.randn(6, 32)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# SwiGLU and silu_mul


def silu_mul_reference(gate, up):
    return F.silu(gate) * up


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_mul_matches_float64(dtype):
    g = torch.Generator().manual_seed(2)
    gate64, up64, dy64 = (torch.randn(4, 33, 70, generator=g, dtype=torch.float64) * 4 for _ in range(3))
    gate, up = leaf(gate64, dtype), leaf(up64, dtype)
    out, (dg, du) = grads_of(tgt.silu_mul, [gate, up], dy64.to(dtype))
    ref_in = [leaf(t.detach().double(), torch.float64) for t in (gate, up)]
    outr, (dgr, dur) = grads_of(silu_mul_reference, ref_in, dy64.to(dtype).double())
    assert out.dtype == dtype
    assert_close_to(out, outr, dtype)
    assert_close_to(dg, dgr, dtype, scale=2)
    assert_close_to(du, dur, dtype, scale=2)


def test_silu_mul_on_strided_views_and_saved_bytes():
    base = torch.randn(16, 2 * 48)
    gate, up = base[:, :48].requires_grad_(False), base[:, 48:]
    torch.testing.assert_close(tgt.silu_mul(gate, up), silu_mul_reference(gate, up), rtol=1e-6, atol=1e-6)
    g, u = torch.randn(64, 128, requires_grad=True), torch.randn(64, 128, requires_grad=True)
    assert sum(t.numel() for t in saved_tensors(lambda: tgt.silu_mul(g, u))) == 2 * g.numel()  # gate and up, nothing more


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_swiglu_matches_float64(dtype, dim):
    g = torch.Generator().manual_seed(4)
    x64 = torch.randn(6, 10, 12, generator=g, dtype=torch.float64) * 3
    x = leaf(x64, dtype)
    out_shape = list(x.shape)
    out_shape[dim] //= 2
    dy = torch.randn(out_shape, generator=g, dtype=torch.float64).to(dtype)

    def reference(t):
        a, b = t.chunk(2, dim)
        return F.silu(a) * b

    out, (dx,) = grads_of(lambda t: tgt.swiglu(t, dim), [x], dy)
    outr, (dxr,) = grads_of(reference, [leaf(x.detach().double(), torch.float64)], dy.double())
    assert list(out.shape) == out_shape
    assert_close_to(out, outr, dtype)
    assert_close_to(dx, dxr, dtype, scale=2)


def test_swiglu_rejects_odd_split_and_bad_dim():
    with pytest.raises(ValueError, match=r"swiglu: input.shape\[1\] must be even, got 5"):
        tgt.swiglu(torch.randn(2, 5), 1)
    with pytest.raises(IndexError, match=r"swiglu: dim must be in \[-2, 1\], got 2"):
        tgt.swiglu(torch.randn(2, 4), 2)


# ----------------------------------------------------------------------------------------------
# rotary position embedding


def rope_inputs(shape, trig_shape, dtype, seed=5, trig_grad=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    angle = torch.randn(trig_shape, generator=g, dtype=torch.float64)
    cos, sin = leaf(angle.cos(), dtype), leaf(angle.sin(), dtype)
    if not trig_grad:
        cos.requires_grad_(False)
        sin.requires_grad_(False)
    dy = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return leaf(x, dtype), cos, sin, dy


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("trig_shape", [(2, 1, 6, 16), (1, 1, 6, 16), (2, 3, 6, 16)])
def test_rotary_position_embedding_matches_the_vendor_formulas(dtype, mode, trig_shape):
    x, cos, sin, dy = rope_inputs((2, 3, 6, 16), trig_shape, dtype, trig_grad=True)
    out, (dx, dcos, dsin) = grads_of(lambda a, c, s: tgt.rotary_position_embedding(a, c, s, mode), [x, cos, sin], dy)
    ref_in = [leaf(t.detach().double(), torch.float64) for t in (x, cos, sin)]
    outr, (dxr, dcosr, dsinr) = grads_of(lambda a, c, s: _rope._rope_composite(a, c, s, mode), ref_in, dy.double())
    assert_close_to(out, outr, dtype)
    assert_close_to(dx, dxr, dtype, scale=2)
    assert dcos.shape == cos.shape and dsin.shape == sin.shape
    assert_close_to(dcos, dcosr, dtype, scale=8)
    assert_close_to(dsin, dsinr, dtype, scale=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_apply_rotary_pos_emb_matches_hugging_face(dtype):
    transformers = pytest.importorskip("transformers")
    hf = transformers.models.llama.modeling_llama.apply_rotary_pos_emb
    g = torch.Generator().manual_seed(6)
    # (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim) projections, as Llama makes them
    q64 = torch.randn(2, 7, 4, 32, generator=g, dtype=torch.float64).transpose(1, 2)
    k64 = torch.randn(2, 7, 2, 32, generator=g, dtype=torch.float64).transpose(1, 2)
    angle = torch.randn(2, 7, 32, generator=g, dtype=torch.float64)
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    q, k = leaf(q64, dtype), leaf(k64, dtype)
    qo, ko = tgt.apply_rotary_pos_emb(q, k, cos, sin)
    dq_up, dk_up = torch.randn(qo.shape, generator=g).to(dtype), torch.randn(ko.shape, generator=g).to(dtype)
    (qo * dq_up).sum().add((ko * dk_up).sum()).backward()
    qr, kr = leaf(q.detach().double(), torch.float64), leaf(k.detach().double(), torch.float64)
    qor, kor = hf(qr, kr, cos.double(), sin.double())
    (qor * dq_up.double()).sum().add((kor * dk_up.double()).sum()).backward()
    for got, want in ((qo, qor), (ko, kor), (q.grad, qr.grad), (k.grad, kr.grad)):
        assert_close_to(got.detach(), want.detach(), dtype, scale=2)


def test_rope_saves_no_copy_of_the_input_when_cos_sin_need_no_grad():
    x, cos, sin, _ = rope_inputs((2, 4, 8, 16), (2, 1, 8, 16), torch.float32)
    assert sum(t.numel() for t in saved_tensors(lambda: tgt.rotary_position_embedding(x, cos, sin))) == 2 * cos.numel()


def test_rope_bad_mode_and_fallback():
    x, cos, sin, _ = rope_inputs((1, 2, 4, 8), (1, 1, 4, 8), torch.float32)
    with pytest.raises(ValueError, match="rotary_position_embedding: mode must be 0, 1, 2 or 3, got 7"):
        tgt.rotary_position_embedding(x, cos, sin, 7)
    x3 = x.detach()[0]  # 3-D: torch composite, same formula
    torch.testing.assert_close(tgt.rotary_position_embedding(x3, cos[0], sin[0]),
                               _rope._rope_composite(x3, cos[0], sin[0], 0))


def test_rope_gradients_are_the_same_for_any_thread_count():
    x, cos, sin, dy = rope_inputs((3, 4, 50, 32), (1, 1, 50, 32), torch.float32, trig_grad=True)
    assert_gradients_do_not_depend_on_threads(lambda a, c, s: tgt.rotary_position_embedding(a, c, s, 0), [x, cos, sin],
                                              dy)


# ----------------------------------------------------------------------------------------------
# torch.library: opcheck and torch.compile


def _opcheck_cases():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 16, generator=g)
    w = torch.rand(16, generator=g) + 0.5
    rstd = torch.rand(6, 1, generator=g) + 0.5
    gate, up = torch.randn(5, 12, generator=g), torch.randn(12, 5, generator=g).t()
    q = torch.randn(2, 6, 3, 16, generator=g).transpose(1, 2)
    cos, sin = torch.randn(2, 1, 6, 16, generator=g), torch.randn(2, 1, 6, 16, generator=g)
    return [
        ("rms_norm", (x.requires_grad_(), w.requires_grad_(), 1e-6)),
        ("rms_norm", (x.t().contiguous().t(), w, 1e-6)),
        ("rms_norm_grad", (torch.randn(6, 16, generator=g), x.detach(), rstd, w.detach())),
        ("silu_mul", (gate.requires_grad_(), up.requires_grad_())),
        ("silu_mul_grad", (torch.randn(5, 12, generator=g), gate.detach(), up.detach())),
        ("swi_glu", (torch.randn(4, 10, generator=g).requires_grad_(), 1)),
        ("swi_glu", (torch.randn(10, 4, generator=g).t(), 0)),
        ("swi_glu_grad", (torch.randn(4, 5, generator=g), torch.randn(4, 10, generator=g), 1)),
        ("rotary_position_embedding", (q.requires_grad_(), cos, sin, 0)),
        ("rotary_position_embedding", (q.detach(), cos.expand(2, 3, 6, 16), sin.expand(2, 3, 6, 16), 1)),
        ("rotary_position_embedding_grad", (torch.randn(2, 3, 6, 16, generator=g), cos, sin, q.detach(), 0)),
        ("rotary_position_embedding_grad", (torch.randn(2, 3, 6, 16, generator=g), cos, sin, None, 1)),
    ]


@pytest.mark.parametrize("index", range(len(_opcheck_cases())))
def test_opcheck(index):
    name, args = _opcheck_cases()[index]
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


def test_compile_fullgraph_gives_eager_results():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 6, 32, generator=g, requires_grad=True)
    w = torch.rand(32, generator=g, requires_grad=True)
    angle = torch.randn(2, 6, 8, generator=g)

    def block(x, w):
        h = tgt.rms_norm(x, (32,), w, 1e-6)
        q = h.view(2, 6, 4, 8).transpose(1, 2)
        q, k = tgt.apply_rotary_pos_emb(q, q, angle.cos(), angle.sin())
        return tgt.silu_mul(q, k).sum()

    assert_compiled_matches_eager(block, [x, w])


def test_numpy_entries_exist():
    for name in ("rms_norm", "rms_norm_grad", "swi_glu", "swi_glu_grad", "rotary_position_embedding",
                 "rotary_position_embedding_grad"):
        assert callable(getattr(tilegrad, name)), name


# ----------------------------------------------------------------------------------------------
# second derivatives and torch.func: torch's values, never a silently wrong number


def _double_backward_cases():
    g = torch.Generator().manual_seed(9)
    x, w = torch.randn(5, 16, generator=g), torch.rand(16, generator=g) + 0.5
    gate, up = torch.randn(4, 12, generator=g), torch.randn(4, 12, generator=g)
    q = torch.randn(2, 3, 6, 16, generator=g)
    angle = torch.randn(2, 1, 6, 16, generator=g)
    return {
        "rms_norm": (lambda a, b: tgt.rms_norm(a, (16,), b, 1e-6), lambda a, b: F.rms_norm(a, (16,), b, 1e-6), [x, w]),
        "silu_mul": (tgt.silu_mul, lambda a, b: F.silu(a) * b, [gate, up]),
        "swiglu": (lambda a: tgt.swiglu(a), lambda a: F.silu(a.chunk(2, -1)[0]) * a.chunk(2, -1)[1], [gate]),
        "rope": (lambda a, c, s: tgt.rotary_position_embedding(a, c, s, 0),
                 lambda a, c, s: _rope._rope_composite(a, c, s, 0), [q, angle.cos(), angle.sin()]),
        "rope_constant_trig": (lambda a: tgt.rotary_position_embedding(a, angle.cos(), angle.sin(), 1),
                               lambda a: _rope._rope_composite(a, angle.cos(), angle.sin(), 1), [q]),
    }


@pytest.mark.parametrize("name", sorted(_double_backward_cases()))
def test_second_derivatives_are_torchs(name):
    assert_second_derivatives_match(*_double_backward_cases()[name])


def test_torch_func_grad_and_vmap():
    g = torch.Generator().manual_seed(10)
    x, w = torch.randn(3, 8, generator=g), torch.rand(8, generator=g) + 0.5
    got = torch.func.grad(lambda a: tgt.rms_norm(a, (8,), w).pow(2).sum())(x)
    want = torch.func.grad(lambda a: F.rms_norm(a, (8,), w).pow(2).sum())(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.func.vmap(tgt.silu_mul)(x, x), F.silu(x) * x)
