"""What a patched training step does outside the kernels, counted (deterministic: no timing).

A tiny Llama in tilegrad's bf16 recipe (``model.to(torch.bfloat16)``, ``tgt.patch``,
``tgt.optim.AdamW(master_weights=True, max_grad_norm=1.0)``), sized so every decoder op takes its
kernel path, runs one forward + backward + optimizer step under a ``TorchDispatchMode`` that counts
every op dispatched and names the code (or autograd node) that issued the copies, casts and clones.
The layouts and the hand-off that make those counts are checked against independent references.
"""

import collections
import copy
import math
import os
import traceback

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _tensor  # noqa: E402

_TILEGRAD_DIR = os.path.dirname(os.path.abspath(tgt.__file__))
LAYERS = 2


class Counter(TorchDispatchMode):
    """Ops dispatched while active; for copies and casts also whether tilegrad issued them (a frame
    of tilegrad.torch on the stack, or a tilegrad autograd node running)."""

    WATCHED = ("aten::_to_copy", "aten::clone", "aten::copy_", "aten::cat", "aten::contiguous")

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()
        self.by_tilegrad = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.name().split(".")[0]
        self.ops[name] += 1
        if name in self.WATCHED and _issued_by_tilegrad():
            self.by_tilegrad[name] += 1
        return func(*args, **(kwargs or {}))


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


def _issued_by_tilegrad() -> bool:
    """A tilegrad autograd node is running, or the innermost Python line outside torch (and this
    file) is tilegrad.torch's (the model's own lines run inside tilegrad's patched forwards too)."""
    node = torch._C._current_autograd_node()
    if node is not None and node.name().startswith(("Tilegrad", "LinearCrossEntropy")):
        return True
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_TORCH_DIR) and frame.filename != __file__:
            return frame.filename.startswith(_TILEGRAD_DIR)
    return False


def _bf16_recipe(layers: int = LAYERS):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                      max_position_embeddings=128, tie_word_embeddings=True)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).train().to(torch.bfloat16)
    tgt.patch(model)
    optimizer = tgt.optim.AdamW(model.parameters(), lr=1e-3, max_grad_norm=1.0, master_weights=True)
    return model, optimizer


IDS = torch.randint(0, 512, (2, 64), generator=torch.Generator().manual_seed(1))


def _step(model, optimizer):
    # use_cache=False: with transformers' default, a DynamicCache concatenates k and v in every layer
    # (and autograd copies their gradients back): the model's cost, on torch's path as on tilegrad's
    model(input_ids=IDS, labels=IDS, use_cache=False).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@pytest.fixture(scope="module")
def counted():
    model, optimizer = _bf16_recipe()
    _step(model, optimizer)  # the optimizer's state is made in the first step
    counter = Counter()
    with counter:
        _step(model, optimizer)
    return counter


def test_the_bf16_recipe_step_casts_only_the_norm_weights_gradients(counted):
    # RMSNorm / AddRmsNorm: the weight's gradient is summed in float32 by the kernel and rounded
    # once to the bf16 weight (one small cast per norm: input_layernorm and the fused
    # post-attention norm per layer, and the final norm). Nothing else is cast.
    norms = 2 * LAYERS + 1
    assert counted.by_tilegrad["aten::_to_copy"] == norms
    assert counted.by_tilegrad["aten::copy_"] == 0


def test_the_step_clones_only_the_attention_statistics(counted):
    # Two per layer: lane 0 of the softmax max / sum (the vendor's 8-lane layout, kept whole it
    # would hold 8x the memory until the backward). The rotary embedding and attention write their
    # outputs and gradients in their inputs' layout, so no view of them is copied back: no clone
    # at all outside tilegrad either.
    assert counted.by_tilegrad["aten::clone"] == 2 * LAYERS
    assert counted.ops["aten::clone"] == 2 * LAYERS
    assert counted.by_tilegrad["aten::cat"] == counted.by_tilegrad["aten::contiguous"] == 0


def test_the_optimizer_step_dispatches_nothing_per_parameter():
    """The update, the gradient norm and the step counters go through NumPy views made once: the
    ops torch dispatches during ``step()`` are its profiler marker alone, whatever the model size
    (before: a view per state tensor, and an add, a cast and a copy per step counter)."""
    found = {}
    for layers in (1, 3):
        model, optimizer = _bf16_recipe(layers)
        _step(model, optimizer)
        model(input_ids=IDS, labels=IDS, use_cache=False).loss.backward()
        counter = Counter()
        with counter:
            optimizer.step()
        found[layers] = dict(counter.ops)
        steps = {float(s["step"]) for s in optimizer.state.values()}
        assert steps == {2.0}
    assert found[1] == found[3]
    assert sum(found[3].values()) <= 2


# ---------------------------------------------------------------------------------------------------
# the layouts and hand-off behind those counts, against independent references


def _bsnd_as_bnsd(b, s, n, d, seed):
    """Hugging Face's (B, S, N * D) projection viewed as (B, N, S, D)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, n * d, generator=g).view(b, s, n, d).transpose(1, 2)


def _attention_float64(q, k, v):
    """Causal softmax(q k^T / sqrt(D)) v in float64, kv heads repeated for the query heads."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_output_and_gradients_follow_the_inputs_layout(dtype):
    q, k, v = (_bsnd_as_bnsd(2, 24, n, 16, seed).to(dtype).requires_grad_() for n, seed in ((4, 0), (2, 1), (2, 2)))
    out = tgt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert out.transpose(1, 2).is_contiguous()  # HF's transpose(1, 2).contiguous() is then free
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dy)
    for g in (dq, dk, dv):
        assert g.transpose(1, 2).is_contiguous()  # the view back to (B, S, N * D) needs no copy
    # the same kernel on contiguous copies: the same bits
    qc, kc, vc = (t.detach().contiguous().requires_grad_() for t in (q, k, v))
    out_c = tgt.scaled_dot_product_attention(qc, kc, vc, is_causal=True, enable_gqa=True)
    assert out_c.is_contiguous() and torch.equal(out, out_c)
    for a, b in zip((dq, dk, dv), torch.autograd.grad(out_c, (qc, kc, vc), dy)):
        assert torch.equal(a, b)
    # and the float64 formula
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = _attention_float64(q64, k64, v64)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.double(), expected, **tol)
    for a, b in zip((dq, dk, dv), torch.autograd.grad(expected, (q64, k64, v64), dy.double())):
        torch.testing.assert_close(a.double(), b, **tol)


def _rotate_half_float64(x, cos, sin):
    x, cos, sin = x.double(), cos.double(), sin.double()
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_embedding_output_and_gradient_follow_the_inputs_layout(dtype):
    x = _bsnd_as_bnsd(2, 40, 3, 32, 4).to(dtype).requires_grad_()
    angles = torch.randn(1, 1, 40, 32, generator=torch.Generator().manual_seed(5))
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    y = tgt.rotary_position_embedding(x, cos, sin, 0)
    assert y.transpose(1, 2).is_contiguous()
    dy = _bsnd_as_bnsd(2, 40, 3, 32, 6).to(dtype)  # the gradient attention hands back: the same layout
    (dx,) = torch.autograd.grad(y, x, dy)
    assert dx.transpose(1, 2).is_contiguous()
    xc = x.detach().contiguous().requires_grad_()
    yc = tgt.rotary_position_embedding(xc, cos, sin, 0)
    assert torch.equal(y, yc)
    assert torch.equal(dx, torch.autograd.grad(yc, xc, dy.contiguous())[0])
    x64 = x.detach().double().requires_grad_()
    expected = _rotate_half_float64(x64, cos, sin)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y.double(), expected, **tol)
    torch.testing.assert_close(dx.double(), torch.autograd.grad(expected, x64, dy.double())[0], **tol)


def test_rotary_embedding_backward_allocates_no_placeholders():
    """The eager node asks the kernel for dx alone (cos / sin need no gradient): nothing else is
    allocated (the op path needs 0-element placeholders, the node does not)."""
    x = torch.randn(2, 4, 16, 8, requires_grad=True)
    angles = torch.randn(1, 1, 16, 8)
    y = tgt.rotary_position_embedding(x, angles.cos(), angles.sin(), 0)
    counter = Counter()
    with counter:
        (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert counter.ops["aten::new_empty"] == 0 and counter.ops["aten::empty"] == 1
    torch.testing.assert_close(dx, torch.autograd.grad(_rotate_half_float64(x, angles.cos(), angles.sin()).float(),
                                                       x, torch.ones_like(y))[0])


def test_hand_off_holds_the_tensors_memory_and_reads_tensors_that_require_grad():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t().requires_grad_()
    a = _tensor.as_numpy(t)
    assert a.__array_interface__["data"][0] == t.data_ptr() and a.strides == (4, 16)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4).T.copy()
    del t
    assert np.array_equal(a, expected)  # the array's base keeps the tensor's memory alive


def test_optimizer_follows_a_parameter_whose_memory_was_replaced():
    """``p.data = ...`` between steps: the next update reads and writes the new memory (the cached
    view is made again), as torch.optim.AdamW's does."""
    torch.manual_seed(0)
    ours, theirs = torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(5, 3))
    theirs.data.copy_(ours.data)
    opt_ours = tgt.optim.AdamW([ours], lr=0.1)
    opt_theirs = torch.optim.AdamW([theirs], lr=0.1)
    for step in range(3):
        if step == 2:
            replacement = torch.randn(5, 3)
            ours.data, theirs.data = replacement.clone(), replacement.clone()
        grad = torch.randn(5, 3)
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        opt_ours.step()
        opt_theirs.step()
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    assert float(opt_ours.state[ours]["step"]) == float(opt_theirs.state[theirs]["step"]) == 3.0


def test_optimizer_after_loading_a_state_dict_matches_torch():
    torch.manual_seed(1)
    ours, theirs = torch.nn.Parameter(torch.randn(7)), torch.nn.Parameter(torch.randn(7))
    theirs.data.copy_(ours.data)
    opt_ours = tgt.optim.AdamW([ours], lr=0.05)
    opt_theirs = torch.optim.AdamW([theirs], lr=0.05)
    for step in range(4):
        grad = torch.randn(7)
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        opt_ours.step()
        opt_theirs.step()
        if step == 1:  # both reload torch's state: the moments and step are new tensors
            state = opt_theirs.state_dict()  # (copied: loading keeps the given tensors)
            opt_ours.load_state_dict(copy.deepcopy(state))
            opt_theirs.load_state_dict(copy.deepcopy(state))
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    assert float(opt_ours.state[ours]["step"]) == 4.0
