"""tgt.linear, tgt.nn.Linear and tgt.patch(linear=True) against float64 references written from the
formula (tests/reference/linear.py) and against torch's own F.linear: values and gradients with any
leading dims, the paths (float32 on the core; 16-bit, autocast and small products on torch),
opcheck, torch.compile, shared weights, thread counts, a patched Hugging Face llama and PEFT LoRA."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _eager, _linear  # noqa: E402
from tilegrad.torch import nn as tnn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from reference.linear import assert_close, linear_backward_ref, linear_ref  # noqa: E402


def _tensors(rows_shape, k, n, seed=0, dtype=torch.float32, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*rows_shape, k, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(dtype).requires_grad_()
    b = torch.randn(n, generator=g).to(dtype).requires_grad_() if bias else None
    return x, w, b


def _ran_on_kernel(out):
    """The result came from TilegradLinear (its node sits under the output's reshape)."""
    nodes = [out.grad_fn] + [f for f, _ in out.grad_fn.next_functions if f is not None]
    return any(type(f).__name__ == "TilegradLinearBackward" for f in nodes)


def _np(t):
    return t.detach().numpy()


@pytest.mark.parametrize("rows_shape", [(7,), (2, 3, 5), ()], ids=["2d", "4d", "1d"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_values_and_gradients_against_float64(kernels_at_every_size, rows_shape, with_bias):
    x, w, b = _tensors(rows_shape, 33, 17, bias=with_bias)
    y = tgt.linear(x, w, b)
    assert _ran_on_kernel(y) and y.shape == (*rows_shape, 17)
    x2 = _np(x).reshape(-1, 33)
    ref, scale = linear_ref(x2, _np(w), None if b is None else _np(b))
    assert_close(_np(y).reshape(-1, 17), ref, scale)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(5))
    y.backward(dy)
    (gx, sx), (gw, sw), (gb, sb) = linear_backward_ref(dy.numpy().reshape(-1, 17), x2, _np(w))
    assert_close(_np(x.grad).reshape(-1, 33), gx, sx)
    assert_close(_np(w.grad), gw, sw)
    if b is not None:
        assert_close(_np(b.grad), gb, sb)


def test_agrees_with_torch_linear(kernels_at_every_size):
    x, w, b = _tensors((4, 50), 96, 130, seed=1)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y, yr = tgt.linear(x, w, b), F.linear(xr, wr, br)
    torch.testing.assert_close(y, yr, rtol=1e-5, atol=1e-5)
    y.square().sum().backward()
    yr.square().sum().backward()
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_only_the_needed_gradients_and_expanded_upstream_gradient(kernels_at_every_size):
    """A frozen weight gets no gradient; sum()'s stride-0 upstream gradient and a transposed weight
    (a column-major view) are read correctly."""
    x, w, b = _tensors((6,), 8, 5, seed=2)
    w_frozen = w.detach().t().contiguous().t()  # column-major, no grad
    y = tgt.linear(x, w_frozen, b)
    assert _ran_on_kernel(y)
    y.sum().backward()
    torch.testing.assert_close(x.grad, w_frozen.sum(0).expand(6, 8), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(b.grad, torch.full((5,), 6.0))


def test_shared_weight_accumulates(kernels_at_every_size):
    x, w, _ = _tensors((5,), 12, 12, seed=3)
    y = tgt.linear(tgt.linear(x, w), w)  # the same weight twice: autograd adds both gradients
    y.sum().backward()
    xn, wn = _np(x).astype(np.float64), _np(w).astype(np.float64)
    h = xn @ wn.T
    dy = np.ones((5, 12))
    want = dy.T @ h + (dy @ wn).T @ xn
    np.testing.assert_allclose(_np(w.grad), want, rtol=1e-5, atol=1e-5)


def test_second_derivatives_match_torch(kernels_at_every_size):
    x, w, b = _tensors((4,), 6, 3, seed=4)
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    gx, = torch.autograd.grad(tgt.linear(x, w, b).square().sum(), x, create_graph=True)
    gxr, = torch.autograd.grad(F.linear(xr, wr, b).square().sum(), xr, create_graph=True)
    torch.testing.assert_close(gx, gxr)
    torch.testing.assert_close(torch.autograd.grad(gx.sum(), w)[0], torch.autograd.grad(gxr.sum(), wr)[0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_runs_torchs_linear(kernels_at_every_size, dtype):
    x, w, b = _tensors((9,), 16, 8, seed=5, dtype=dtype)
    y = tgt.linear(x, w, b)
    assert not _ran_on_kernel(y)
    assert torch.equal(y, F.linear(x, w, b))


def test_autocast_keeps_torchs_behaviour(kernels_at_every_size):
    x, w, b = _tensors((9,), 16, 8, seed=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, want = tgt.linear(x, w, b), F.linear(x, w, b)
    assert y.dtype == want.dtype == torch.bfloat16
    assert torch.equal(y, want)


def test_small_products_run_torchs_linear(monkeypatch):
    monkeypatch.setitem(_eager.CROSSOVER, "linear", {torch.float32: 1000})
    x, w, b = _tensors((4,), 8, 8, seed=7)  # 256 multiply-adds
    assert not _ran_on_kernel(tgt.linear(x, w, b))
    x, w, b = _tensors((4,), 32, 32, seed=7)  # 4096
    assert _ran_on_kernel(tgt.linear(x, w, b))


def test_what_the_core_does_not_take_gets_torchs_result_or_error(kernels_at_every_size):
    x, w, b = _tensors((3,), 4, 2, seed=8)
    x64, w64 = x.double(), w.double()
    assert torch.equal(tgt.linear(x64, w64), F.linear(x64, w64))
    empty = tgt.linear(torch.zeros(0, 4), w, b)
    assert empty.shape == (0, 2)
    torch.testing.assert_close(tgt.linear(torch.zeros(3, 0), torch.zeros(2, 0), b), b.expand(3, 2))
    with pytest.raises(RuntimeError):
        tgt.linear(x, w[:, :3])


def test_results_do_not_depend_on_thread_count(kernels_at_every_size, torch_threads):
    results = []
    for n in (1, 2, 3):
        torch_threads(n)
        x, w, b = _tensors((300,), 200, 260, seed=9)
        y = tgt.linear(x, w, b)
        y.backward(torch.ones_like(y))
        results.append([t.detach().clone() for t in (y, x.grad, w.grad, b.grad)])
    for other in results[1:]:
        for a, c in zip(results[0], other):
            assert torch.equal(a, c)


def _opcheck_cases():
    """(op name, args) for tests/torch/test_ops.py's check that every tilegrad op has an opcheck case."""
    g = torch.Generator().manual_seed(10)
    x, w, b = torch.randn(6, 5, generator=g), torch.randn(4, 5, generator=g), torch.randn(4, generator=g)
    grad = lambda a: a.clone().requires_grad_()  # noqa: E731
    return [
        ("linear", (grad(x), grad(w), grad(b))),
        ("linear", (grad(x.t().contiguous().t()), grad(w), None)),
        ("linear_backward", (torch.randn(6, 4, generator=g), x, w, [True, True, True])),
        ("linear_backward", (torch.ones(1, 1).expand(6, 4), x, w, [False, True, False])),
    ]


@pytest.mark.parametrize("name, args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)


def test_compile_fullgraph_matches_eager(kernels_at_every_size):
    def step(x, w, b):
        return tgt.linear(torch.tanh(tgt.linear(x, w, b)), w.t()[:3], None).square().mean()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    x, w, b = _tensors((2, 5), 3, 3, seed=11)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    loss, loss_ref = compiled(x, w, b), step(xr, wr, br)
    torch.testing.assert_close(loss, loss_ref)
    loss.backward()
    loss_ref.backward()
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want)


def test_nn_linear_is_torchs_module_on_tilegrad(kernels_at_every_size):
    torch.manual_seed(12)
    ref = torch.nn.Linear(10, 7)
    ours = tnn.Linear(10, 7)
    ours.load_state_dict(ref.state_dict())
    assert isinstance(ours, torch.nn.Linear)
    x = torch.randn(3, 10)
    y = ours(x)
    assert _ran_on_kernel(y)
    torch.testing.assert_close(y, ref(x), rtol=1e-6, atol=1e-6)
    assert torch.equal(torch.jit.script(ours)(x), ref(x))


def test_patch_swaps_linear_modules_and_unpatch_restores():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.SiLU(), torch.nn.Linear(8, 2))
    summary = tgt.patch(model)
    assert summary.counts()["torch.nn.Linear -> tilegrad.torch.nn.Linear"] == 2
    assert type(model[0]) is type(model[2]) is tnn.Linear
    tgt.unpatch(model)
    assert type(model[0]) is torch.nn.Linear
    tgt.patch(model, linear=False)
    assert type(model[0]) is torch.nn.Linear
    with pytest.raises(TypeError, match="patch: linear must be True or False"):
        tgt.patch(model, linear=1)


def _tiny_llama(seed=0):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      attn_implementation="eager")
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config)


def _loss_and_grads(model, tokens):
    model.zero_grad()
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_patched_hf_llama_has_torchs_losses_and_gradients(kernels_at_every_size, one_torch_thread):
    reference, patched = _tiny_llama(), _tiny_llama()
    patched.load_state_dict(reference.state_dict())
    summary = tgt.patch(patched)
    assert summary.counts()["torch.nn.Linear -> tilegrad.torch.nn.Linear"] == 2 * 7 + 1  # q k v o gate up down, lm_head
    reference.train(), patched.train()
    tokens = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(13))
    loss_ref, grads_ref = _loss_and_grads(reference, tokens)
    loss, grads = _loss_and_grads(patched, tokens)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=0)
    for name, grad in grads_ref.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-5 * grad.abs().max().item(), msg=name)
    assert type(patched.model.layers[0].self_attn.q_proj) is tnn.Linear and type(patched.lm_head) is tnn.Linear
    assert patched(input_ids=tokens, labels=tokens).logits is None  # the loss is still the fused one


def test_patched_peft_lora_model(kernels_at_every_size, one_torch_thread):
    peft = pytest.importorskip("peft")
    reference, patched = _tiny_llama(seed=1), _tiny_llama(seed=1)
    config = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    reference = peft.get_peft_model(reference, peft.LoraConfig(**config))
    patched = peft.get_peft_model(patched, peft.LoraConfig(**config))
    patched.load_state_dict(reference.state_dict())
    for model in (reference, patched):  # LoRA's B starts at zero: make the adapters matter
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.1, generator=torch.Generator().manual_seed(len(name)))
    tgt.patch(patched)
    q_proj = patched.base_model.model.model.layers[0].self_attn.q_proj
    assert type(q_proj.base_layer) is tnn.Linear and type(q_proj.lora_A["default"]) is tnn.Linear
    tokens = torch.randint(0, 96, (2, 10), generator=torch.Generator().manual_seed(14))
    loss_ref, grads_ref = _loss_and_grads(reference, tokens)
    loss, grads = _loss_and_grads(patched, tokens)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=0)
    assert grads_ref and set(grads) == set(grads_ref)
    for name, grad in grads_ref.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-5 * grad.abs().max().item(), msg=name)
