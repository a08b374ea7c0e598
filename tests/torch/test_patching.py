"""tilegrad.torch.patch / unpatch / enable / disable: on a small Llama-style model in plain torch and on
Hugging Face causal LMs built from tiny configs (no download): what is replaced, exact restoration,
the same Parameter objects (optimizers unaffected), and 20 training steps with the same losses as
unpatched torch (float32, same seeds and initial weights). Skipped only when torch is not installed."""

import copy
import functools
import importlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch.functional as TF  # noqa: E402
from reference.torch_compare import PATCHED_LOSS_RTOL, assert_same_loss_and_gradients  # noqa: E402
import tilegrad.torch.nn as tnn  # noqa: E402
from tilegrad.torch.patching import CAUSAL_LM_FACTS, disable, enable, is_enabled, patch, unpatch  # noqa: E402

VOCAB, HIDDEN, SEQ, BATCH, STEPS = 96, 32, 12, 3, 20
LOSS_RTOL = 1e-4  # 20 float32 training steps: tilegrad and torch sum in different orders
# the families whose small configs below share one shape (Llama's); the others of CAUSAL_LM_FACTS are
# tested in tests/torch/test_patching_families.py and (Gemma 1 / 2 / 3) tests/torch/test_patch_gemma.py
DENSE_FAMILIES = ["llama", "mistral", "qwen2", "qwen3"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py


# ----------------------------------------------------------------------------------------------
# a small Llama-style model in plain torch


class MLP(torch.nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inner, bias=False)
        self.up_proj = torch.nn.Linear(hidden, inner, bias=False)
        self.down_proj = torch.nn.Linear(inner, hidden, bias=False)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = torch.nn.RMSNorm(hidden)
        self.mlp = MLP(hidden, 2 * hidden)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class TinyLlama(torch.nn.Module):
    """embed -> 2 x (RMSNorm, SwiGLU MLP, residual) -> norm -> lm_head; CE loss + a BCE side head."""

    def __init__(self, vocab=VOCAB, hidden=HIDDEN, layers=2):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, hidden, padding_idx=0)
        self.layers = torch.nn.ModuleList(Block(hidden) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(hidden)
        self.lm_head = torch.nn.Linear(hidden, vocab, bias=False)
        self.side_head = torch.nn.Linear(hidden, 1)
        self.loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.05)
        self.side_loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.5]))

    def forward(self, tokens, labels):
        h = self.embed_tokens(tokens)
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        logits = self.lm_head(h)
        loss = self.loss_fn(logits.flatten(0, 1), labels.flatten())
        side = self.side_head(h).squeeze(-1)
        return loss + 0.1 * self.side_loss_fn(side, (tokens % 2).float())


class TinyLinearCE(torch.nn.Module):
    """embed -> SiLU MLP -> torch.nn.LinearCrossEntropyLoss (owns the projection)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.mlp = MLP(HIDDEN, HIDDEN)
        self.head = torch.nn.LinearCrossEntropyLoss(HIDDEN, VOCAB, ignore_index=-100)

    def forward(self, tokens, labels):
        return self.head(self.mlp(self.embed(tokens)).flatten(0, 1), labels.flatten())


def batches(seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        labels = (3 * tokens + 1) % VOCAB  # learnable, so the losses move
        labels[:, :2] = -100
        yield tokens, labels


def train(model, make_optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2), forward=None):
    forward = forward or (lambda m, tokens, labels: m(tokens, labels))
    opt = make_optimizer(model.parameters())
    losses = []
    for tokens, labels in batches():
        loss = forward(model, tokens, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def snapshot(model):
    """Everything unpatch must restore: each module's class and attribute names, and the parameters."""
    modules = {name: (type(m), sorted(m.__dict__)) for name, m in model.named_modules()}
    return modules, [(name, id(p)) for name, p in model.named_parameters()]


def assert_losses_match(patched, reference):
    assert len(patched) == len(reference) == STEPS
    for step, (a, b) in enumerate(zip(patched, reference)):
        assert abs(a - b) <= LOSS_RTOL * max(1.0, abs(b)), f"step {step}: patched {a} vs torch {b}"
    assert reference[-1] < reference[0]  # the run actually trained


# ----------------------------------------------------------------------------------------------
# plain torch model


def test_patch_replaces_supported_modules_and_keeps_parameters():
    torch.manual_seed(0)
    model = TinyLlama()
    before = snapshot(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    summary = patch(model, linear=False)  # the Linear swap: tests/torch/test_linear.py

    assert summary.counts() == {
        "torch.nn.Embedding -> tilegrad.torch.nn.Embedding": 1,
        "torch.nn.SiLU -> tilegrad.torch.nn.SiLU": 2,
        "torch.nn.CrossEntropyLoss -> tilegrad.torch.nn.CrossEntropyLoss": 1,
        "torch.nn.BCEWithLogitsLoss -> tilegrad.torch.nn.BCEWithLogitsLoss": 1,
        "torch.nn.RMSNorm -> tilegrad.torch.nn.RMSNorm": 3,
    }
    assert {r.path for r in summary} == {"embed_tokens", "layers.0.mlp.act_fn", "layers.1.mlp.act_fn", "loss_fn",
                                          "side_loss_fn", "layers.0.norm", "layers.1.norm", "norm"}
    text = str(summary)
    assert "layers.1.mlp.act_fn" in text and "tilegrad.torch.nn.SiLU" in text and "8 item(s)" in text
    assert type(model.embed_tokens) is tnn.Embedding and type(model.layers[0].mlp.act_fn) is tnn.SiLU
    assert type(model.loss_fn) is tnn.CrossEntropyLoss and type(model.side_loss_fn) is tnn.BCEWithLogitsLoss
    # same module objects, same Parameter objects, same state_dict; torch options kept
    assert [(n, id(p)) for n, p in model.named_parameters()] == before[1]
    assert model.loss_fn.label_smoothing == 0.05 and model.embed_tokens.padding_idx == 0
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert isinstance(model.embed_tokens, torch.nn.Embedding)

    restored = unpatch(model)
    assert len(restored) == 8 and "restored" in str(restored)
    assert snapshot(model) == before
    assert len(unpatch(model)) == 0  # nothing left to undo


def test_patch_flags_select_what_is_replaced():
    model = TinyLlama()
    summary = patch(model, silu=False, embedding=False, binary_cross_entropy_with_logits=False, rms_norm=False,
                    linear=False)
    assert [r.path for r in summary] == ["loss_fn"]
    more = patch(model, linear=False)  # patching again adds only what is new
    assert sorted(r.path for r in more) == ["embed_tokens", "layers.0.mlp.act_fn", "layers.0.norm",
                                            "layers.1.mlp.act_fn", "layers.1.norm", "norm", "side_loss_fn"]
    assert len(unpatch(model)) == 8
    assert type(model.loss_fn) is torch.nn.CrossEntropyLoss and not hasattr(model.loss_fn, "z_loss_scale")


def test_subclasses_of_torch_modules_are_left_alone():
    class MySiLU(torch.nn.SiLU):
        def forward(self, x):
            return super().forward(x) * 2

    model = torch.nn.Sequential(MySiLU(), torch.nn.SiLU())
    summary = patch(model)
    assert [r.path for r in summary] == ["1"] and type(model[0]) is MySiLU


def test_bad_arguments_raise_naming_the_argument():
    with pytest.raises(TypeError, match="model"):
        patch("not a model")
    with pytest.raises(TypeError, match="silu"):
        patch(torch.nn.SiLU(), silu="yes")
    with pytest.raises(TypeError, match="model"):
        unpatch(42)


@pytest.mark.parametrize("model_class", [TinyLlama, TinyLinearCE])
def test_training_with_patch_gives_torch_losses(model_class):
    torch.manual_seed(0)
    reference = model_class()
    patched = copy.deepcopy(reference)
    summary = patch(patched)
    assert len(summary) >= 3
    assert_losses_match(train(patched), train(reference))
    for (name, p), q in zip(patched.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-3, atol=1e-4), name


def test_optimizer_built_before_patch_keeps_training_the_model():
    torch.manual_seed(0)
    model = TinyLlama()
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step, (tokens, labels) in enumerate(batches()):
        if step == 5:
            patch(model)  # mid-training: the optimizer's parameter list and momentum stay valid
        if step == 15:
            unpatch(model)
        loss = model(tokens, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ref_losses = train(reference, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
    assert_losses_match(losses, ref_losses)


def test_patched_modules_run_on_tilegrad():
    """The swapped modules call tilegrad's ops (seen by the autograd graph), not torch's."""
    model = TinyLlama()
    tokens, labels = next(batches())
    patch(model)
    names = graph_node_names(model(tokens, labels))
    assert any("tilegrad" in n.lower() for n in names), names
    unpatch(model)
    assert not any("tilegrad" in n.lower() for n in graph_node_names(model(tokens, labels)))


def graph_node_names(loss):
    """Names of every node in loss's autograd graph (tilegrad's eager nodes: Tilegrad<Op>Backward)."""
    seen, stack, names = set(), [loss.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__ if not hasattr(node, "name") else node.name())
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return names


# ----------------------------------------------------------------------------------------------
# enable / disable


@pytest.mark.usefixtures("kernels_at_every_size")  # a small SiLU on tilegrad, not the crossover
def test_enable_routes_torch_functional_and_disable_restores_it():
    originals = {name: getattr(F, name) for name in TF.__all__ if hasattr(F, name)}
    assert not is_enabled()
    try:
        routed = enable()
        assert set(routed) == set(originals)
        assert enable() == routed  # idempotent
        for name in originals:
            assert getattr(F, name) is getattr(TF, name), name
        # torch's own modules now reach tilegrad; fallbacks (float64 here) reach torch, no recursion
        torch.manual_seed(0)
        x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
        t = torch.randint(0, 7, (5,))
        loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(x, t)
        want = originals["cross_entropy"](x.detach(), t, label_smoothing=0.1)
        assert torch.allclose(loss, want, rtol=1e-12)
        loss.backward()
        x32 = x.detach().float().requires_grad_()
        assert any("tilegrad" in n.lower() for n in graph_node_names(torch.nn.SiLU()(x32).sum()))
    finally:
        restored = disable()
    assert set(restored) == set(originals)
    for name, fn in originals.items():
        assert getattr(F, name) is fn, name
    assert not is_enabled() and disable() == ()


def test_training_under_enable_gives_torch_losses():
    torch.manual_seed(0)
    reference = TinyLlama()
    model = copy.deepcopy(reference)
    try:
        enable()
        losses = train(model)
    finally:
        disable()
    assert_losses_match(losses, train(reference))


def test_package_exposes_patch_functions_and_the_module_by_its_own_name():
    """``tgt.patch(model)`` is the README's one-line entry point: the package attribute is the function.
    The module is ``tilegrad.torch.patching``, so importing it by name yields the module (a module named
    ``patch`` would be shadowed by the function: ``import tilegrad.torch.patch as p`` gave the function)."""
    import types

    import tilegrad.torch as tgt
    patching = importlib.import_module("tilegrad.torch.patching")
    assert isinstance(patching, types.ModuleType)

    for name in ("patch", "unpatch", "enable", "disable", "PatchSummary"):
        assert getattr(tgt, name) is getattr(patching, name), name
    assert isinstance(tgt.patch, types.FunctionType)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tilegrad.torch.patch")


# ----------------------------------------------------------------------------------------------
# Hugging Face causal LMs from tiny configs (no download)


def tiny_causal_lm(model_type, seed=0, tie_word_embeddings=False, dtype=torch.float32):
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(
        model_type, vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, hidden_act="silu",
        tie_word_embeddings=tie_word_embeddings, attn_implementation="eager")
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).to(dtype)


def reference_and_patched(model_type, patch_options=None, **kwargs):
    """Two tiny causal LMs with the same weights, in training mode; the second one patched (with
    ``patch_options``)."""
    reference = tiny_causal_lm(model_type, **kwargs)
    patched = tiny_causal_lm(model_type, **kwargs)
    patched.load_state_dict(reference.state_dict())
    patch(patched, **(patch_options or {}))
    reference.train()
    patched.train()
    return reference, patched


def has_fused_loss(model):
    """patch gave the model its fused-loss class (tilegrad's subclass of the model's own class)."""
    return type(model).__module__ == "tilegrad.torch.patching" and "forward" not in model.__dict__


def assert_patched_model_pickles_whole(model):
    """torch.save / torch.load of a patched causal LM: the same (tilegrad) classes and the same loss."""
    import io
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert [type(m) for m in loaded.modules()] == [type(m) for m in model.modules()]
    assert any(type(m).__name__.startswith("Tilegrad") for m in loaded.modules())
    tokens, labels = next(batches())
    model.train()
    loaded.train()
    assert torch.equal(loaded(input_ids=tokens, labels=labels).loss, model(input_ids=tokens, labels=labels).loss)


def hf_forward(model, tokens, labels):
    return model(input_ids=tokens, labels=labels).loss


@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
def test_hf_causal_lm_patch_and_unpatch(model_type, monkeypatch):
    model = tiny_causal_lm(model_type)
    before = snapshot(model)
    model_class = type(model)
    original_acts = [layer.mlp.act_fn for layer in model.model.layers]
    summary = patch(model)
    counts = summary.counts()
    assert counts["transformers.activations.SiLUActivation -> tilegrad.torch.nn.SiLU"] == 2
    assert counts["torch.nn.Embedding -> tilegrad.torch.nn.Embedding"] == 1
    assert any(r.path.endswith("forward") for r in summary) and "forward" not in model.__dict__
    # a subclass of the model's own class, under the same name (transformers saves it in the config)
    assert type(model) is not model_class and isinstance(model, model_class)
    assert type(model).__name__ == model_class.__name__
    assert [layer.mlp.act_fn for layer in model.model.layers] == original_acts  # same objects, new class
    assert type(model.model.embed_tokens) is tnn.Embedding

    tokens, labels = next(batches())
    model.train()
    head_calls = []
    linear_forward = torch.nn.Linear.forward

    def counted(module, x):
        if module is model.lm_head:
            head_calls.append(tuple(x.shape))
        return linear_forward(module, x)
    monkeypatch.setattr(torch.nn.Linear, "forward", counted)
    monkeypatch.setattr(tnn.Linear, "forward", counted)  # patch(linear=True) swapped lm_head to ours
    out = model(input_ids=tokens, labels=labels)
    assert head_calls == []  # the (tokens, vocab) logits were never formed by lm_head
    assert out.logits is None and out.loss.dtype == torch.float32 and out.loss.requires_grad
    as_tuple = model(input_ids=tokens, labels=labels, return_dict=False)
    assert torch.equal(as_tuple[0], out.loss)
    model.eval()  # evaluation keeps the logits (the model's own forward)
    evaluated = model(input_ids=tokens, labels=labels)
    assert evaluated.logits.shape == (BATCH, SEQ, VOCAB)
    assert abs(evaluated.loss.item() - out.loss.item()) <= 1e-5 * out.loss.item()  # no dropout in these configs
    assert model(input_ids=tokens).loss is None
    assert len(head_calls) == 2  # evaluation and generation-style calls do form logits
    monkeypatch.undo()

    restored = unpatch(model)
    assert len(restored) == len(summary)
    assert snapshot(model) == before and type(model) is model_class


def test_hf_fused_loss_steps_aside_for_a_hook_on_lm_head():
    """A forward hook on lm_head may change the logits; the fused loss, reading only its weight, would
    skip it: with one, the model's own forward runs (the hook sees the logits), the same loss."""
    reference, patched = reference_and_patched("llama")
    tokens, labels = next(batches())
    seen = []
    hook = patched.lm_head.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    got = patched(input_ids=tokens, labels=labels)
    assert seen == [(BATCH, SEQ, VOCAB)] and got.logits is not None
    assert abs(got.loss.item() - reference(input_ids=tokens, labels=labels).loss.item()) <= 1e-5 * got.loss.item()
    hook.remove()
    assert patched(input_ids=tokens, labels=labels).logits is None


@pytest.mark.usefixtures("kernels_at_every_size")  # every decoder block on tilegrad
@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
def test_hf_causal_lm_training_gives_torch_losses(model_type):
    reference, patched = reference_and_patched(model_type)
    assert_losses_match(train(patched, forward=hf_forward), train(reference, forward=hf_forward))


def test_hf_causal_lm_loss_options_match_transformers():
    """num_items_in_batch (sum / count, as the Trainer passes it) and explicit shift_labels."""
    reference, patched = reference_and_patched("llama")
    tokens, labels = next(batches())
    shifted = torch.roll(labels, -1, dims=1)
    shifted[:, -1] = -100
    for kwargs in (dict(num_items_in_batch=torch.tensor(17)), dict(shift_labels=shifted),
                   dict(num_items_in_batch=5, shift_labels=shifted)):
        want = reference(input_ids=tokens, labels=labels, **kwargs).loss
        got = patched(input_ids=tokens, labels=labels, **kwargs)
        assert got.logits is None
        assert abs(got.loss.item() - want.item()) <= 1e-5 * abs(want.item()), kwargs


def test_hf_causal_lm_keeps_logits_path_when_loss_is_customised():
    """A model whose loss_function is not transformers' standard causal-LM loss keeps its own forward."""
    model = tiny_causal_lm("llama")
    patch(model)
    model.train()
    tokens, labels = next(batches())
    model.loss_function = lambda logits, labels, vocab_size, **kw: logits.float().mean()
    out = model(input_ids=tokens, labels=labels)
    assert out.logits is not None and torch.allclose(out.loss, out.logits.float().mean())
    unpatch(model)


def test_deepcopy_of_patched_hf_model_is_patched_on_its_own():
    model = tiny_causal_lm("llama")
    patch(model)
    clone = copy.deepcopy(model)
    assert clone.forward.__self__ is clone and model.forward.__self__ is model
    tokens, labels = next(batches())
    clone.train()
    model.train()
    assert torch.equal(clone(input_ids=tokens, labels=labels).loss, model(input_ids=tokens, labels=labels).loss)
    assert len(unpatch(clone)) == len(unpatch(copy.deepcopy(model))) and not has_fused_loss(clone)
    assert has_fused_loss(model) and type(model.model.embed_tokens) is tnn.Embedding


def test_hf_causal_lm_with_tied_embeddings_trains_like_torch():
    """lm_head.weight is embed_tokens.weight: both tilegrad backward paths add into one Parameter."""
    reference, patched = reference_and_patched("llama", tie_word_embeddings=True)
    assert patched.lm_head.weight is patched.model.embed_tokens.weight
    assert_losses_match(train(patched, forward=hf_forward), train(reference, forward=hf_forward))


@pytest.mark.usefixtures("kernels_at_every_size")  # every decoder block on tilegrad
def test_hf_causal_lm_bfloat16_loss_and_gradients_match_torch():
    """bfloat16 weights: one step's loss and lm_head gradient agree with the unpatched model to bf16 accuracy."""
    reference, patched = reference_and_patched("llama", dtype=torch.bfloat16)
    tokens, labels = next(batches())
    want, got = hf_forward(reference, tokens, labels), hf_forward(patched, tokens, labels)
    want.backward()
    got.backward()
    assert abs(got.item() - want.item()) <= 2 ** -7 * abs(want.item())
    g_want, g_got = reference.lm_head.weight.grad.double(), patched.lm_head.weight.grad.double()
    assert (g_got - g_want).abs().max() <= 2 ** -6 * g_want.abs().max()


BF16_LOSS_RTOL = 3e-2  # 20 bf16 steps: a few bf16 ulps (2^-8 relative each) of the loss


@pytest.mark.usefixtures("kernels_at_every_size")  # every decoder block on tilegrad
@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
def test_hf_causal_lm_bfloat16_training_follows_torch(model_type):
    """bfloat16 weights, 20 AdamW steps: the patched model's losses stay within bf16 tolerance of the
    unpatched model's. The roundings that differ: Hugging Face's RMSNorm rounds x * rstd to bf16 and
    then the product with the weight (twice), tilegrad's rounds once; the SwiGLU composite rounds
    silu(gate) before multiplying by up, tilegrad's silu_mul once; the rotate-half composite rounds
    q * cos and rotate_half(q) * sin before adding them, tilegrad's RoPE once; the fused loss keeps
    the logits in fp32. Attention stays the model's own here: tilegrad's keeps P and its sums in fp32
    where eager attention rounds them to bf16, and 20 bf16 steps of the tiny qwen3 amplify that past
    this tolerance (measured: 5.8% apart, while both stay as close to the fp32 model's losses as
    eager bf16 is); tests/torch/test_attention.py compares the patched attention with fp32. The fused
    residual add (add_rms_norm) also stays the model's own here, for the same reason: its backward adds
    the residual gradient before one rounding where torch rounds twice, and the tiny qwen3 amplifies
    that (measured: 4.5% from the fp32 model's losses, eager bf16 6.7%, each other 4.3%);
    tests/torch/test_patch_add_rms_norm.py compares it with the unpatched model step by step."""
    reference, patched = reference_and_patched(model_type, patch_options=dict(attention=False, add_rms_norm=False),
                                               dtype=torch.bfloat16)
    want = train(reference, forward=hf_forward)
    got = train(patched, forward=hf_forward)
    assert len(got) == len(want) == STEPS
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= BF16_LOSS_RTOL * abs(b), f"step {step}: patched {a} vs torch {b}"
    assert want[-1] < want[0] and got[-1] < got[0]


def test_patching_an_inner_causal_lm_then_its_container_does_not_stack():
    """A causal LM patched on its own, then inside a container: one fused forward, and the fallback
    path (eval) still reaches the model's own forward. unpatch(container) undoes every patch inside
    it, including those made from the inner model (records live on the modules they changed)."""
    lm = tiny_causal_lm("llama")
    container = torch.nn.ModuleDict({"lm": lm})
    before = snapshot(container)
    patched = len(patch(lm))
    assert [r.path for r in patch(container)] == []  # everything in it is patched already
    lm.eval()
    tokens, _ = next(batches())
    assert lm(input_ids=tokens).logits.shape == (BATCH, SEQ, VOCAB)
    assert len(unpatch(container)) == patched and len(unpatch(lm)) == 0
    assert snapshot(container) == before and not has_fused_loss(lm)


def test_unpatch_of_a_container_restores_what_was_patched_from_a_submodule():
    """patch(m[0]); patch(m); unpatch(m) leaves nothing of either patch; unpatch(m[0]) alone restores
    only what lies inside m[0]."""
    torch.manual_seed(0)
    model = TinyLlama()
    before = snapshot(model)
    first = patch(model.layers[0], linear=False)
    assert [r.path for r in first] == ["norm", "mlp.act_fn"]
    second = patch(model, linear=False)
    assert "layers.0.mlp.act_fn" not in {r.path for r in second}  # patched already: not again
    assert len(unpatch(model.layers[1])) == 2  # only its own RMSNorm and SiLU
    assert type(model.layers[0].mlp.act_fn) is tnn.SiLU and type(model.embed_tokens) is tnn.Embedding
    restored = unpatch(model)
    assert len(restored) == len(first) + len(second) - 2
    assert snapshot(model) == before


class _Scale(torch.nn.Module):
    def forward(self, weight):
        return 2.0 * weight


def test_parametrization_registered_after_patch_survives_unpatch():
    """torch.nn.utils.parametrize derives a class from the module's class (tilegrad's after patch);
    unpatch keeps the parametrization over the original class instead of dropping ``weight``."""
    from torch.nn.utils import parametrize

    torch.manual_seed(0)
    model = TinyLlama()
    tokens, labels = next(batches())
    plain = model.embed_tokens.weight.detach().clone()
    patch(model)
    parametrize.register_parametrization(model.embed_tokens, "weight", _Scale())
    patched_out = model.embed_tokens(tokens)
    unpatch(model)

    embedding = model.embed_tokens
    assert parametrize.is_parametrized(embedding, "weight")
    assert type(embedding).__bases__ == (torch.nn.Embedding,) and not isinstance(embedding, tnn.Embedding)
    torch.testing.assert_close(embedding.weight, 2.0 * plain, rtol=0, atol=0)
    torch.testing.assert_close(embedding(tokens), patched_out, rtol=0, atol=0)
    torch.testing.assert_close(embedding(tokens), F.embedding(tokens, 2.0 * plain, padding_idx=0), rtol=0, atol=0)
    parametrize.remove_parametrizations(embedding, "weight")
    assert type(embedding) is torch.nn.Embedding


def test_unpatch_refuses_a_class_it_cannot_restore_and_changes_nothing():
    torch.manual_seed(0)
    model = TinyLlama()
    patch(model)
    model.layers[0].mlp.act_fn.__class__ = torch.nn.ReLU  # someone else's swap on top of ours
    with pytest.raises(RuntimeError, match=r"unpatch: cannot restore.*layers\.0\.mlp\.act_fn.*ReLU"):
        unpatch(model)
    assert type(model.embed_tokens) is tnn.Embedding  # nothing was restored


class _ConfigRaises(torch.nn.Module):
    """A module whose ``config`` property raises when read (patch must inspect it: a model-like name)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.act = torch.nn.SiLU()

    @property
    def config(self):
        raise RuntimeError("config is not loaded")


def test_patch_that_fails_half_way_changes_nothing():
    _ConfigRaises.__name__ = _ConfigRaises.__qualname__ = "BrokenForCausalLM"
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"first": TinyLlama(), "broken": _ConfigRaises()})
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="config is not loaded"):
        patch(model)
    assert snapshot(model) == before
    assert len(unpatch(model)) == 0


def test_torch_linear_cross_entropy_loss_is_replaced_at_the_root_and_inside():
    head = torch.nn.LinearCrossEntropyLoss(HIDDEN, VOCAB)
    assert patch(head, linear=False).counts() == {
        "torch.nn.LinearCrossEntropyLoss -> tilegrad.torch.nn.LinearCrossEntropyLoss": 1}
    assert type(head) is tnn.LinearCrossEntropyLoss
    model = TinyLinearCE()
    assert [r.path for r in patch(model)].count("head") == 1 and type(model.head) is tnn.LinearCrossEntropyLoss


# ----------------------------------------------------------------------------------------------
# transformers: arguments passed through by name, and loud refusals


def _cache_field(output):
    """The name transformers gives the cache in this release (``past_key_values`` or ``cache``)."""
    import dataclasses
    names = [f.name for f in dataclasses.fields(output) if f.name in ("past_key_values", "cache")]
    assert len(names) == 1, names
    return names[0]


@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
def test_hf_fused_forward_takes_what_the_model_forward_takes(model_type):
    """Every named argument of the model's own forward reaches the decoder under its own name: the
    cache comes back from the fused path exactly as from the model's own forward. (Attention stays
    the model's own: the reference attends eagerly, whose padded query rows, masked everywhere with
    finite minima, average all keys, where SDPA and tilegrad give them 0.)"""
    import inspect

    reference, patched = reference_and_patched(model_type, patch_options=dict(attention=False))
    tokens, labels = next(batches())
    positions = torch.arange(SEQ).expand(BATCH, SEQ)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[0, :3] = 0
    kwargs = dict(input_ids=tokens, labels=labels, attention_mask=mask, position_ids=positions, use_cache=True,
                  output_hidden_states=True)
    want, got = reference(**kwargs), patched(**kwargs)
    assert got.logits is None and want.logits is not None
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5 * abs(want.loss.item())
    field = _cache_field(want)
    assert type(getattr(got, field)) is type(getattr(want, field)) and getattr(want, field) is not None
    assert len(got.hidden_states) == len(want.hidden_states)
    torch.testing.assert_close(got.hidden_states[-1], want.hidden_states[-1])
    # positional arguments bind by the model's own signature too
    names = list(inspect.signature(type(reference).forward).parameters)[1:]
    positional = [kwargs.get(name) for name in names[:names.index("labels") + 1]]
    assert abs(patched(*positional).loss.item() - want.loss.item()) <= 1e-5 * abs(want.loss.item())


def test_patched_forward_shows_the_models_own_signature():
    """transformers' Trainer keeps the dataset columns named in inspect.signature(model.forward)."""
    import inspect

    model = tiny_causal_lm("llama")
    want = list(inspect.signature(model.forward).parameters)
    patch(model)
    assert list(inspect.signature(model.forward).parameters) == want and "labels" in want


def tiny_unmapped_lm():
    """A causal LM of a family not in CAUSAL_LM_FACTS: GPT-BigCode (GPT-2's layout, one key-value head)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPTBigCodeConfig(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=1, n_head=2, n_positions=64)
    torch.manual_seed(0)
    return transformers.GPTBigCodeForCausalLM(config)


def _assert_one_warning_naming(record, *fragments):
    messages = [str(w.message) for w in record if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    for fragment in fragments:
        assert fragment in messages[0], (fragment, messages[0])


def test_an_unknown_causal_lm_is_warned_about_and_listed():
    """A GPT-BigCode causal LM: its embeddings are patched, and its loss is said to stay unfused."""
    model = tiny_unmapped_lm()
    with pytest.warns(UserWarning) as record:
        summary = patch(model)
    _assert_one_warning_naming(record, "GPTBigCodeForCausalLM", "'gpt_bigcode'", "CAUSAL_LM_FACTS", "not fused")
    assert [s.path for s in summary.skipped] == ["<model>"] and "'gpt_bigcode'" in summary.skipped[0].reason
    assert "left as it was (1):" in str(summary)
    assert summary.counts()["torch.nn.Embedding -> tilegrad.torch.nn.Embedding"] == 2  # tokens, positions
    unpatch(model)


def test_strict_patch_raises_and_changes_nothing():
    model = tiny_unmapped_lm()
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"strict=True.*GPTBigCodeForCausalLM.*'gpt_bigcode'"):
        patch(model, strict=True)
    assert snapshot(model) == before
    with pytest.raises(TypeError, match="strict must be True or False"):
        patch(model, strict="yes")


def test_a_causal_lm_whose_head_is_not_linear_is_warned_about():
    model = tiny_causal_lm("llama")
    model.lm_head = torch.nn.Sequential(model.lm_head)
    with pytest.warns(UserWarning) as record:
        summary = patch(model)
    _assert_one_warning_naming(record, "LlamaForCausalLM", "lm_head is Sequential", "not torch.nn.Linear")
    assert not has_fused_loss(model) and len(summary.skipped) == 1
    model.train()
    tokens, labels = next(batches())
    assert model(input_ids=tokens, labels=labels).logits is not None  # the model's own forward, unchanged


def _library_subclass_with_forward(base, forward):
    """A transformers causal-LM class (by its module) whose own forward differs from Llama's, as another
    release's might; a user's subclass is not mapped (its super().forward reaches the fused forward)."""
    return type(base.__name__.replace("Llama", "Custom"), (base,),
                {"forward": forward, "__module__": "transformers.models.custom.modeling_custom"})


def test_a_forward_that_cannot_be_mapped_is_warned_about():
    transformers = pytest.importorskip("transformers")
    base = transformers.LlamaForCausalLM

    def no_logits_to_keep(self, input_ids=None, labels=None, **kwargs):
        return base.forward(self, input_ids=input_ids, labels=labels, **kwargs)

    def extra_argument(self, input_ids=None, labels=None, logits_to_keep=0, temperature=1.0, **kwargs):
        return base.forward(self, input_ids=input_ids, labels=labels, logits_to_keep=logits_to_keep, **kwargs)

    for forward, reason in ((no_logits_to_keep, "has no parameter 'logits_to_keep'"),
                            (extra_argument, "takes 'temperature', which LlamaModel.forward does not")):
        model = tiny_causal_lm("llama")
        model.__class__ = _library_subclass_with_forward(base, forward)
        with pytest.warns(UserWarning) as record:
            summary = patch(model)
        _assert_one_warning_naming(record, "CustomForCausalLM", reason)
        assert len(summary.skipped) == 1 and not has_fused_loss(model)


def test_patching_a_supported_causal_lm_says_nothing():
    import warnings

    model = tiny_causal_lm("qwen2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = patch(model, strict=True)
    assert summary.skipped == [] and has_fused_loss(model)


# ----------------------------------------------------------------------------------------------
# transformers: the decoder blocks (RMSNorm, SwiGLU MLP, rotary embedding) on tilegrad


def _decoder_class_counts(model, prefix):
    kinds = ("RMSNorm", "MLP", "Attention")
    return {kind: sum(type(m).__name__ == prefix + kind for m in model.modules()) for kind in kinds}


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
def test_hf_decoder_blocks_run_on_tilegrad_and_unpatch_restores_them(model_type):
    model = tiny_causal_lm(model_type)
    prefix = CAUSAL_LM_FACTS[model_type].prefix
    expected = _decoder_class_counts(model, prefix)
    assert expected["RMSNorm"] >= 5 and expected["MLP"] == expected["Attention"] == 2
    before = snapshot(model)
    keys = list(model.state_dict())
    summary = patch(model)
    module = f"transformers.models.{model_type}.modeling_{model_type}"
    for kind, count in expected.items():
        key = f"{module}.{prefix}{kind} -> tilegrad.torch.patching.Tilegrad{prefix}{kind}"
        assert summary.counts()[key] == count, key
    assert list(model.state_dict()) == keys

    tokens, labels = next(batches())
    model.train()
    out = model(input_ids=tokens, labels=labels)
    nodes = set(graph_node_names(out.loss))
    assert {"TilegradRmsNormBackward", "TilegradSiluMulBackward", "TilegradRopeBackward"} <= nodes, nodes
    assert out.logits is None

    unpatch(model)
    assert snapshot(model) == before and _decoder_class_counts(model, prefix) == expected


def test_hf_decoder_patch_flags_and_other_activations():
    model = tiny_causal_lm("llama")
    summary = patch(model, rms_norm=False, rope=False)
    assert not any("RMSNorm" in r.after or "Attention" in r.after for r in summary)
    assert sum("TilegradLlamaMLP" in r.after for r in summary) == 2
    unpatch(model)
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(
        "llama", vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, hidden_act="gelu", attn_implementation="eager")
    torch.manual_seed(0)
    gelu = transformers.AutoModelForCausalLM.from_config(config)
    reference = copy.deepcopy(gelu)
    patch(gelu)
    tokens, labels = next(batches())
    gelu.eval()
    reference.eval()
    torch.testing.assert_close(gelu(input_ids=tokens).logits, reference(input_ids=tokens).logits,
                               rtol=1e-5, atol=1e-5)  # the MLP kept its GELU (its own forward)


def test_patched_hf_model_saves_its_own_architecture(tmp_path):
    """transformers writes type(model).__name__ into the saved config: the patched class keeps it."""
    model = tiny_causal_lm("llama")
    patch(model)
    model.save_pretrained(tmp_path)
    import json
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_patched_hf_model_pickles_whole():
    import io

    model = tiny_causal_lm("qwen3")
    patch(model)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded.model.norm) is type(model.model.norm)
    assert type(loaded.model.norm).__qualname__ == "TilegradQwen3RMSNorm"
    import tilegrad.torch.patching as patching
    assert patching.__getattr__("TilegradQwen3RMSNorm") is type(model.model.norm)
    tokens, labels = next(batches())
    model.eval()
    loaded.eval()
    torch.testing.assert_close(loaded(input_ids=tokens).logits, model(input_ids=tokens).logits, rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------
# transformers: the fused loss gives the model's own numbers, inside the model's own forward


def causal_lm_loss64(hidden, weight, labels, num_items_in_batch=None):
    """transformers' ForCausalLMLoss written out in float64: position t predicts labels[:, t + 1],
    -100 is ignored, the mean over the kept tokens or, with num_items_in_batch, their sum divided by it."""
    logits = hidden.double()[:, :-1] @ weight.double().T
    targets = labels[:, 1:].reshape(-1)
    logits = logits.reshape(targets.shape[0], -1)
    kept = targets != -100
    nll = torch.logsumexp(logits[kept], dim=-1) - logits[kept].gather(1, targets[kept, None])[:, 0]
    return nll.sum() / (kept.sum() if num_items_in_batch is None else num_items_in_batch)


def capture_final_hidden_states(model):
    """The decoder's final norm output (lm_head's input) of each forward, its gradient kept; returns
    (list, hook handle)."""
    captured = []

    def keep(module, args, output):
        output.retain_grad()
        captured.append(output)
    return captured, model.model.norm.register_forward_hook(keep)


def loss_options(num_items_in_batch):
    return {} if num_items_in_batch is None else {"num_items_in_batch": torch.tensor(num_items_in_batch)}


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("num_items_in_batch", [None, 17])
def test_hf_bfloat16_fused_loss_is_float32_unrounded_and_its_gradients_follow(request, model_type, on_kernel,
                                                                               num_items_in_batch):
    """bf16 parameters: transformers upcasts the logits before its loss, so the loss is a float32
    value; the fused loss returns its float32 loss unrounded (not rounded to bf16 on the way, 7.65625
    for 7.6435), against float64 from the model's own final hidden states, and the gradients that
    flow from it into the bf16 hidden states and lm_head.weight match float64 too. Small problems
    take torch's composite, larger ones the kernel: both."""
    from reference.torch_compare import assert_matches
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    model = tiny_causal_lm(model_type, dtype=torch.bfloat16)
    patch(model)
    model.train()
    captured, hook = capture_final_hidden_states(model)
    tokens, labels = next(batches())
    out = model(input_ids=tokens, labels=labels, **loss_options(num_items_in_batch))
    hook.remove()
    assert out.logits is None and out.loss.dtype == torch.float32  # the fused path, a float32 loss
    hidden64 = captured[0].detach().double().requires_grad_()
    weight64 = model.lm_head.weight.detach().double().requires_grad_()
    want = causal_lm_loss64(hidden64, weight64, labels, num_items_in_batch)
    assert abs(out.loss.item() - want.item()) <= 1e-5 * want.item(), (out.loss.item(), want.item())
    out.loss.backward()
    want.backward()
    assert_matches(captured[0].grad, hidden64.grad, torch.bfloat16, "d hidden states")
    assert_matches(model.lm_head.weight.grad, weight64.grad, torch.bfloat16, "d lm_head.weight")


# PATCHED_LOSS_RTOL, PATCHED_GRAD_RTOL and assert_same_loss_and_gradients: reference/torch_compare.py


@pytest.mark.parametrize("model_type", DENSE_FAMILIES)
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("num_items_in_batch", [None, 17])
def test_hf_patched_loss_and_every_gradient_equal_the_unpatched_models(request, model_type, on_kernel, dtype,
                                                                       num_items_in_batch):
    """One training step: the loss and every parameter's gradient of a patched model equal the
    unpatched model's, on torch's composite (small problems) and on the kernels."""
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    reference, patched = reference_and_patched(model_type, dtype=dtype)
    tokens, labels = next(batches())
    options = loss_options(num_items_in_batch)
    got = patched(input_ids=tokens, labels=labels, **options)
    assert got.logits is None  # the fused path
    want = reference(input_ids=tokens, labels=labels, **options)
    assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, dtype)


@functools.lru_cache(maxsize=None)
def aux_loss_llama_class(name):
    """A user's LlamaForCausalLM subclass (called ``name``) whose forward adds an auxiliary loss to the
    model's own."""
    transformers = pytest.importorskip("transformers")

    class AuxLossLlama(transformers.LlamaForCausalLM):
        def forward(self, input_ids=None, labels=None, logits_to_keep=0, **kwargs):
            out = super().forward(input_ids=input_ids, labels=labels, logits_to_keep=logits_to_keep, **kwargs)
            if out.loss is not None:
                out.loss = out.loss + 100.0 + self.model.embed_tokens.weight.square().mean()
            return out
    AuxLossLlama.__name__ = AuxLossLlama.__qualname__ = name
    return AuxLossLlama


def as_class(model, cls):
    model.__class__ = cls
    return model


@pytest.mark.parametrize("name", ["AuxLossLlamaForCausalLM", "AuxLossModel"])
def test_hf_subclass_forward_runs_and_its_super_call_is_fused(name):
    """A subclass's own forward (an auxiliary loss: 106.25 must not become 6.25) runs, and the fused
    loss applies where it calls LlamaForCausalLM.forward through super(), whatever the subclass is
    called; a deep copy is patched the same way, and unpatch restores the subclass."""
    subclass = aux_loss_llama_class(name)
    reference = as_class(tiny_causal_lm("llama"), subclass)
    model = copy.deepcopy(reference)
    summary = patch(model)
    reference.train()
    model.train()
    tokens, labels = next(batches())
    got = model(input_ids=tokens, labels=labels)
    assert got.logits is None  # fused inside the subclass's forward
    want = reference(input_ids=tokens, labels=labels)
    assert want.loss.item() > 100.0
    clone = copy.deepcopy(model)
    assert type(clone) is type(model) and torch.equal(clone(input_ids=tokens, labels=labels).loss, got.loss)
    assert_same_loss_and_gradients(got.loss, want.loss, model, reference, torch.float32)
    assert any(f"{name}.forward" in r.after for r in summary), str(summary)
    assert isinstance(model, subclass) and type(model).__name__ == name
    unpatch(model)
    assert type(model) is subclass


def test_hf_subclass_that_reads_logits_through_the_library_forward_keeps_them():
    """A subclass calling LlamaForCausalLM.forward by name (not super) and reading the logits gets
    the model's own forward, logits included: the fused class is only ever reached through super()."""
    transformers = pytest.importorskip("transformers")

    class LogitPenaltyLlama(transformers.LlamaForCausalLM):
        def forward(self, input_ids=None, labels=None, **kwargs):
            out = transformers.LlamaForCausalLM.forward(self, input_ids=input_ids, labels=labels, **kwargs)
            out.loss = out.loss + out.logits.float().square().mean()
            return out

    reference = as_class(tiny_causal_lm("llama"), LogitPenaltyLlama)
    model = copy.deepcopy(reference)
    patch(model)
    reference.train()
    model.train()
    tokens, labels = next(batches())
    got, want = model(input_ids=tokens, labels=labels), reference(input_ids=tokens, labels=labels)
    assert got.logits is not None
    assert_same_loss_and_gradients(got.loss, want.loss, model, reference, torch.float32)


def autocast_wrapper(forward, calls):
    """What accelerate's prepare(model) sets as the instance's forward: the forward it found, run
    under bf16 autocast; records each call."""
    @functools.wraps(forward)
    def wrapped(*args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            calls.append(torch.is_autocast_enabled("cpu"))
            return forward(*args, **kwargs)
    return wrapped


def test_hf_forward_wrapped_on_the_instance_before_patch_is_kept_and_said():
    """accelerate's prepare(model), then patch: the wrapper (its autocast) still runs; it holds the
    library's forward, past any fused class, so patch says it leaves the loss unfused."""
    reference = tiny_causal_lm("llama")
    model = copy.deepcopy(reference)
    reference_calls, calls = [], []
    reference.forward = autocast_wrapper(reference.forward, reference_calls)
    model.forward = autocast_wrapper(model.forward, calls)
    with pytest.warns(UserWarning) as record:
        summary = patch(model)
    _assert_one_warning_naming(record, "LlamaForCausalLM", "forward is set on the instance", "patch before")
    assert [s.path for s in summary.skipped] == ["<model>"]
    reference.train()
    model.train()
    tokens, labels = next(batches())
    got, want = model(input_ids=tokens, labels=labels), reference(input_ids=tokens, labels=labels)
    assert calls == reference_calls == [True] and got.logits is not None
    assert abs(got.loss.item() - want.loss.item()) <= PATCHED_LOSS_RTOL[torch.bfloat16] * want.loss.item()
    with pytest.raises(ValueError, match="forward is set on the instance"):
        patch(copy.deepcopy(model), strict=True)


def test_hf_forward_wrapped_after_patch_runs_the_fused_loss_inside_the_wrapper():
    """patch, then accelerate's prepare(model): the wrapper wraps the fused forward, whose loss then
    runs under the wrapper's autocast (a bf16 projection, a float32 loss)."""
    reference = tiny_causal_lm("llama")
    model = copy.deepcopy(reference)
    patch(model)
    reference_calls, calls = [], []
    reference.forward = autocast_wrapper(reference.forward, reference_calls)
    model.forward = autocast_wrapper(model.forward, calls)
    reference.train()
    model.train()
    tokens, labels = next(batches())
    got, want = model(input_ids=tokens, labels=labels), reference(input_ids=tokens, labels=labels)
    assert calls == reference_calls == [True] and got.logits is None
    assert got.loss.dtype == want.loss.dtype == torch.float32
    assert abs(got.loss.item() - want.loss.item()) <= PATCHED_LOSS_RTOL[torch.bfloat16] * want.loss.item()
    unpatch(model)  # the wrapper still holds the fused forward, which now steps aside
    assert model(input_ids=tokens, labels=labels).logits is not None and len(calls) == 2


def test_hf_tuple_output_keeps_the_unpatched_positions():
    """return_dict=False: transformers' to_tuple drops None fields, so a None logits field would move
    the cache to index 1; the fused path keeps the unpatched layout with None at the logits' index."""
    reference, patched = reference_and_patched("llama")
    tokens, labels = next(batches())
    kwargs = dict(input_ids=tokens, labels=labels, use_cache=True, output_hidden_states=True, return_dict=False)
    want, got = reference(**kwargs), patched(**kwargs)
    assert isinstance(got, tuple) and isinstance(want, tuple)
    assert len(got) == len(want) >= 4
    assert want[1].shape == (BATCH, SEQ, VOCAB) and got[1] is None
    assert abs(got[0].item() - want[0].item()) <= 1e-5 * want[0].item()
    assert [type(x) for x in got[2:]] == [type(x) for x in want[2:]]
    torch.testing.assert_close(got[3][-1], want[3][-1])  # the hidden states at their own index


def test_hf_patched_model_compiles_whole_and_trains_like_the_unpatched():
    """torch.compile(fullgraph=True) of a patched model (its unpatched twin compiles): the same loss
    and gradients as the unpatched model, with the fused path (logits None)."""
    reference, patched = reference_and_patched("llama")
    tokens, labels = next(batches())
    compiled = torch.compile(patched, fullgraph=True)
    try:
        got = compiled(input_ids=tokens, labels=labels)
    finally:
        torch._dynamo.reset()
    assert got.logits is None
    want = reference(input_ids=tokens, labels=labels)
    assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, torch.float32)
