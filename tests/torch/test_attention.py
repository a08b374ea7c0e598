"""tilegrad.torch.scaled_dot_product_attention against a float64 reference written from the formula
(forward and every gradient) and against torch's F.scaled_dot_product_attention: causal and not,
boolean and additive masks, GQA, Sq != Skv, odd lengths, fully masked rows, 16-bit inputs, thread
counts; the fallbacks to torch; what autograd saves; opcheck and torch.compile(fullgraph=True) of
the tilegrad::flash_attention ops; Hugging Face models patched to attend through it."""

import math
import re

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _attention  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py

TOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}


def reference(q, k, v, keep=None, is_causal=False, scale=None):
    """softmax(q k^T * scale, masked) v in float64, per the formula: kv head n // G serves query head
    n; masked scores are -inf; a row that keeps nothing gives 0. keep: True = attend."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    sq, skv = s.shape[-2:]
    kept = torch.ones(sq, skv, dtype=torch.bool)
    if is_causal:
        kept = kept.tril()
    if keep is not None:
        kept = kept & keep
    kept = kept.expand(s.shape)
    s = s.masked_fill(~kept, -math.inf)
    row_max = s.amax(dim=-1, keepdim=True).clamp_min(-1e300)  # finite for an empty row
    e = (s - row_max).exp()
    p = e / e.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    return p @ v


def inputs(b, n1, n2, sq, skv, d, dv=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n1, sq, d, generator=g).to(dtype).requires_grad_()
    k = torch.randn(b, n2, skv, d, generator=g).to(dtype).requires_grad_()
    v = torch.randn(b, n2, skv, dv or d, generator=g).to(dtype).requires_grad_()
    dy = torch.randn(b, n1, sq, dv or d, generator=g).to(dtype)
    return q, k, v, dy


def forward_backward(fn, q, k, v, dy, **kwargs):
    """fn's output and the gradients of q, k, v for the output gradient dy (fresh leaves)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, **kwargs)
    out.backward(dy)
    return out.detach(), q.grad, k.grad, v.grad


def reference_results(q, k, v, dy, **kwargs):
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = reference(q, k, v, **kwargs)
    out.backward(dy.double())
    return out.detach(), q.grad, k.grad, v.grad


def assert_close_to(got, want, tol, what=""):
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        bound = tol * max(1.0, b.abs().max().item())
        err = (a.double() - b).abs().max().item()
        assert err <= bound, f"{what} {name}: error {err} > {bound}"


def tilegrad_sdpa_on_kernel(q, k, v, **kwargs):
    out = tgt.scaled_dot_product_attention(q, k, v, **kwargs)
    assert type(out.grad_fn).__name__ == "TilegradAttentionBackward", out.grad_fn
    return out


# (B, N1, N2, Sq, Skv, D, Dv): MHA, GQA 3:1, MQA, Sq != Skv both ways, odd lengths past the blocks
SHAPES = [(2, 4, 4, 16, 16, 8, 8), (1, 6, 2, 37, 37, 16, 16), (2, 4, 1, 5, 70, 8, 8), (1, 2, 2, 130, 9, 32, 24),
          (1, 3, 3, 200, 600, 16, 16)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_float64_reference(shape, is_causal):
    b, n1, n2, sq, skv, d, dv = shape
    q, k, v, dy = inputs(b, n1, n2, sq, skv, d, dv)
    got = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, is_causal=is_causal, enable_gqa=n1 != n2)
    want = reference_results(q, k, v, dy, is_causal=is_causal)
    assert_close_to(got, want, TOL[torch.float32], f"{shape} causal={is_causal}")


def test_agrees_with_torch_sdpa_and_takes_its_scale():
    q, k, v, dy = inputs(2, 6, 3, 33, 47, 16)
    got = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, scale=0.3, enable_gqa=True)
    want = forward_backward(F.scaled_dot_product_attention, q, k, v, dy, scale=0.3, enable_gqa=True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def padding_and_random_masks(b, n1, sq, skv, seed=3):
    g = torch.Generator().manual_seed(seed)
    full = torch.rand(b, n1, sq, skv, generator=g) > 0.3
    padding = torch.ones(b, 1, 1, skv, dtype=torch.bool)
    padding[0, ..., skv - 3:] = False  # a padded batch entry: (B, 1, 1, Skv) broadcast over rows and heads
    causal_rows = torch.ones(sq, skv, dtype=torch.bool).tril()  # a 2-d mask
    per_batch = torch.rand(b, 1, sq, skv, generator=g) > 0.5
    return {"full": full, "padding": padding, "2d": causal_rows, "per_batch": per_batch}


@pytest.mark.parametrize("kind", ["full", "padding", "2d", "per_batch"])
@pytest.mark.parametrize("additive", [False, True])
def test_masks_boolean_and_additive(kind, additive):
    b, n1, n2, sq, skv, d = 2, 4, 2, 19, 23, 8
    q, k, v, dy = inputs(b, n1, n2, sq, skv, d)
    keep = padding_and_random_masks(b, n1, sq, skv)[kind]
    keep = keep | (torch.arange(skv) == 0)  # no fully masked rows here (tested below)
    mask = torch.zeros(keep.shape).masked_fill(~keep, -math.inf) if additive else keep
    got = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, attn_mask=mask, enable_gqa=True)
    assert_close_to(got, reference_results(q, k, v, dy, keep=keep), TOL[torch.float32], kind)
    want = forward_backward(F.scaled_dot_product_attention, q, k, v, dy, attn_mask=mask, enable_gqa=True)
    for a, b_ in zip(got, want):
        torch.testing.assert_close(a, b_, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("additive", [False, True])
def test_fully_masked_rows_give_what_torch_gives(additive):
    q, k, v, dy = inputs(1, 2, 2, 6, 10, 8)
    keep = torch.rand(1, 2, 6, 10, generator=torch.Generator().manual_seed(5)) > 0.4
    keep[0, 0, 2] = False  # row 2 of head 0 attends to nothing
    keep[0, 1, :, :] = False  # head 1 attends to nothing at all
    keep[0, 0, 0] = True
    mask = torch.zeros(keep.shape).masked_fill(~keep, -math.inf) if additive else keep
    got = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, attn_mask=mask)
    want = forward_backward(F.scaled_dot_product_attention, q, k, v, dy, attn_mask=mask)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.equal(got[0][0, 1], torch.zeros(6, 8)) and torch.equal(got[1][0, 1], torch.zeros(6, 8))


# bf16: the output rounds P to bf16 for P V as torch's kernel does (the spec's bf16 GEMM operands), so
# its error is torch's to within 2%; the gradients keep fp32 sums where torch's are bf16 between blocks.
OUT_SLACK = {torch.bfloat16: 1.02, torch.float16: 1.0}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_inputs_are_closer_to_float64_than_torchs(dtype):
    q, k, v, dy = inputs(1, 8, 2, 256, 1024, 64, dtype=dtype, seed=11)
    got = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, enable_gqa=True)
    theirs = forward_backward(F.scaled_dot_product_attention, q, k, v, dy, enable_gqa=True)
    want = reference_results(q, k, v, dy)
    assert_close_to(got, want, TOL[dtype], str(dtype))
    for name, a, t, w in zip(("out", "dq", "dk", "dv"), got, theirs, want):
        ours, torchs = (a.double() - w).norm().item(), (t.double() - w).norm().item()
        slack = OUT_SLACK[dtype] if name == "out" else 1.0
        assert ours <= slack * torchs, f"{name}: tilegrad's error {ours} > torch's {torchs}"
        assert a.dtype == dtype


def test_results_are_the_same_for_any_thread_count():
    q, k, v, dy = inputs(2, 6, 3, 200, 300, 32, seed=4)
    mask = torch.rand(2, 1, 200, 300, generator=torch.Generator().manual_seed(2)) > 0.2
    for kwargs in ({"is_causal": True}, {"attn_mask": mask}):
        results = {}
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results[threads] = forward_backward(tilegrad_sdpa_on_kernel, q, k, v, dy, enable_gqa=True, **kwargs)
        torch.set_num_threads(1)
        for threads in (2, 3):
            for a, b in zip(results[threads], results[1]):
                assert torch.equal(a, b), f"{threads} threads, {list(kwargs)}"


def test_autograd_saves_only_inputs_output_and_row_statistics():
    q, k, v, dy = inputs(2, 4, 2, 24, 40, 16)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = tgt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    shapes = sorted(tuple(t.shape) for t in saved)
    assert shapes == sorted([tuple(q.shape), tuple(k.shape), tuple(v.shape), tuple(out.shape), (2, 4, 24), (2, 4, 24)])
    stats = [t for t in saved if t.dim() == 3]
    assert all(t.dtype == torch.float32 and t.is_contiguous() for t in stats)


# ---------------------------------------------------------------------------------------------------
# what runs torch's function


def test_dropout_runs_torchs_function():
    q, k, v, _ = inputs(1, 2, 2, 8, 8, 8)
    torch.manual_seed(3)
    got = tgt.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(3)
    want = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert torch.equal(got, want)


def test_unsupported_arguments_run_torchs_function():
    q, k, v, _ = inputs(1, 2, 2, 8, 8, 8)
    bias = torch.randn(1, 2, 8, 8)  # a real additive bias (ALiBi-like): not a boolean mask
    wide_v = torch.randn(1, 2, 8, 12)  # Dv > D
    cases = [dict(attn_mask=bias), dict(attn_mask=bias.requires_grad_()), dict(value=wide_v),
             dict(query=q.double(), key=k.double(), value=v.double())]
    for case in cases:
        args = {"query": q, "key": k, "value": v, **case}
        got = tgt.scaled_dot_product_attention(**args)
        assert torch.equal(got, F.scaled_dot_product_attention(**args))
        assert got.grad_fn is None or not type(got.grad_fn).__name__.startswith("Tilegrad")


def test_argument_errors_are_torchs():
    q, k, v, _ = inputs(1, 4, 2, 8, 8, 8)
    for args in ((q, k, v), (q, k[..., :4], v)):  # head counts without enable_gqa; head dims differ
        with pytest.raises(RuntimeError) as theirs:
            F.scaled_dot_product_attention(*args)
        with pytest.raises(RuntimeError) as ours:
            tgt.scaled_dot_product_attention(*args)
        assert str(ours.value) == str(theirs.value)


def test_broadcast_batch_runs_torchs_function():
    q, k, v, _ = inputs(2, 2, 2, 8, 8, 8)
    got = tgt.scaled_dot_product_attention(q[:1], k, v)
    assert torch.equal(got, F.scaled_dot_product_attention(q[:1], k, v))


@pytest.mark.parametrize("additive", [False, True])
def test_causal_with_a_mask_is_what_the_installed_torch_does(additive):
    """torch 2.13 applies both, 2.14 refuses the pair: tilegrad runs torch's function, so it gives what
    the installed torch gives (its values, or its error)."""
    q, k, v, dy = inputs(2, 4, 2, 21, 30, 8)
    keep = torch.rand(2, 1, 21, 30, generator=torch.Generator().manual_seed(8)) > 0.3
    keep[..., 0] = True
    mask = torch.zeros(keep.shape).masked_fill(~keep, -math.inf) if additive else keep
    options = dict(attn_mask=mask, is_causal=True, enable_gqa=True)
    try:
        want = forward_backward(F.scaled_dot_product_attention, q, k, v, dy, **options)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=re.escape(str(error).splitlines()[0])):
            forward_backward(tgt.scaled_dot_product_attention, q, k, v, dy, **options)
        return
    got = forward_backward(tgt.scaled_dot_product_attention, q, k, v, dy, **options)
    assert_close_to(got, reference_results(q, k, v, dy, keep=keep, is_causal=True), TOL[torch.float32])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_torch_func_transforms_run_the_composite():
    q, k, v, _ = inputs(1, 2, 1, 5, 7, 8)
    grad = torch.func.grad(lambda q_: tgt.scaled_dot_product_attention(q_, k, v, enable_gqa=True).sum())(q.detach())
    qq = q.detach().double().requires_grad_()
    reference(qq, k.detach(), v.detach()).sum().backward()
    torch.testing.assert_close(grad.double(), qq.grad, rtol=1e-5, atol=1e-6)


def test_second_derivatives_follow_the_reference():
    q, k, v, _ = inputs(1, 2, 2, 4, 6, 8)
    q64 = q.detach().double().requires_grad_()

    def gradient_norm(fn, q_):
        (g,) = torch.autograd.grad(fn(q_, k.detach(), v.detach()).square().sum(), q_, create_graph=True)
        return g.square().sum()

    gradient_norm(tgt.scaled_dot_product_attention, q).backward()
    gradient_norm(reference, q64).backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------------------------------
# torch.library: opcheck and torch.compile


def _opcheck_cases():
    q, k, v, dy = inputs(2, 4, 2, 9, 13, 8)
    masked = (torch.rand(2, 1, 9, 13, generator=torch.Generator().manual_seed(1)) > 0.7).expand(2, 4, 9, 13)
    out, smax, ssum = torch.ops.tilegrad.flash_attention(q.detach(), k.detach(), v.detach(), None, True, 0.3)
    qt = q.detach().transpose(1, 2).contiguous().transpose(1, 2)  # BSND memory seen as BNSD, as HF's
    return [
        ("flash_attention", (q, k, v, None, True, 0.3)),
        ("flash_attention", (qt, k.detach(), v.detach(), masked, False, 0.5)),
        ("flash_attention_backward", (dy, q.detach(), k.detach(), v.detach(), out, smax, ssum, None, True, 0.3)),
    ]


@pytest.mark.parametrize("index", range(3))
def test_opcheck(index):
    name, args = _opcheck_cases()[index]
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


def test_compile_fullgraph_gives_eager_results():
    torch._dynamo.reset()
    q, k, v, dy = inputs(2, 4, 2, 12, 12, 8)
    mask = torch.rand(2, 1, 12, 12, generator=torch.Generator().manual_seed(4)) > 0.3
    mask[..., 0] = True

    def attend(q, k, v):
        causal = tgt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return causal + tgt.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    eager = forward_backward(attend, q, k, v, dy)
    compiled = forward_backward(torch.compile(attend, fullgraph=True, backend="aot_eager"), q, k, v, dy)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)


def test_exported_in_the_package():
    assert tgt.scaled_dot_product_attention is _attention.scaled_dot_product_attention
    assert "scaled_dot_product_attention" in tgt.__all__


# ---------------------------------------------------------------------------------------------------
# Hugging Face causal LMs attending through tilegrad (tgt.patch)

HF_FAMILIES = ["llama", "mistral", "qwen2", "qwen3"]


def tiny_causal_lm(model_type, dtype=torch.float32, seed=0):
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(
        model_type, vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, hidden_act="silu",
        attn_implementation="sdpa")
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).to(dtype).train()


def loss_and_gradients(model, tokens, attention_mask=None):
    model.zero_grad()
    loss = model(input_ids=tokens, attention_mask=attention_mask, labels=tokens).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("model_type", HF_FAMILIES)
@pytest.mark.parametrize("padded", [False, True])
def test_patched_hf_model_gives_the_unpatched_losses_and_gradients(model_type, padded, monkeypatch):
    reference = tiny_causal_lm(model_type)
    patched = tiny_causal_lm(model_type)
    tokens = torch.randint(0, 96, (2, 11), generator=torch.Generator().manual_seed(6))
    attention_mask = None
    if padded:
        attention_mask = torch.ones(2, 11, dtype=torch.long)
        attention_mask[1, :3] = 0  # left padding on the second sequence
    summary = tgt.patch(patched, silu=False, embedding=False, linear_cross_entropy=False, rms_norm=False,
                        swiglu=False, rope=False, linear=False, add_rms_norm=False)
    assert patched.config._attn_implementation == "tilegrad"
    assert [r.before for r in summary] == ["'sdpa'"]
    calls = []
    on_kernel = _attention.TilegradAttention.apply
    monkeypatch.setattr(_attention.TilegradAttention, "apply", lambda *a: calls.append(1) or on_kernel(*a))
    want_loss, want_grads = loss_and_gradients(reference, tokens, attention_mask)
    got_loss, got_grads = loss_and_gradients(patched, tokens, attention_mask)
    assert len(calls) == 2  # both layers attended through tilegrad
    assert abs(got_loss.item() - want_loss.item()) <= 1e-5 * abs(want_loss.item())
    for name, want in want_grads.items():
        bound = 1e-5 * want.abs().max().item() + 1e-7
        assert (got_grads[name] - want).abs().max().item() <= bound, name
    tgt.unpatch(patched)
    assert patched.config._attn_implementation == "sdpa"
    calls.clear()
    loss_and_gradients(patched, tokens, attention_mask)
    assert calls == []


def test_patch_attention_keeps_another_choice_made_since_and_patches_once():
    model = tiny_causal_lm("llama")
    model.config._attn_implementation = "eager"
    assert len(tgt.patch(model, attention=True)) > 0
    assert len([r for r in tgt.patch(model) if "_attn_implementation" in r.path]) == 0  # already on tilegrad
    model.config._attn_implementation = "sdpa"  # the user's choice after patch
    tgt.unpatch(model)
    assert model.config._attn_implementation == "sdpa"
    tgt.patch(model)
    tgt.unpatch(model)
    assert model.config._attn_implementation == "sdpa"
