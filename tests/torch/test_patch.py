"""tilegrad.torch.patch / unpatch / enable / disable: on a small Llama-style model in plain torch and on
Hugging Face causal LMs built from tiny configs (no download): what is replaced, exact restoration,
the same Parameter objects (optimizers unaffected), and 20 training steps with the same losses as
unpatched torch (float32, same seeds and initial weights). Skipped only when torch is not installed."""

import copy
import importlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch.functional as TF  # noqa: E402
import tilegrad.torch.nn as tnn  # noqa: E402
from tilegrad.torch.patch import CAUSAL_LM_FACTS, disable, enable, is_enabled, patch, unpatch  # noqa: E402

VOCAB, HIDDEN, SEQ, BATCH, STEPS = 96, 32, 12, 3, 20
LOSS_RTOL = 1e-4  # 20 float32 training steps: tilegrad and torch sum in different orders


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
    summary = patch(model)

    assert summary.counts() == {
        "torch.nn.Embedding -> tilegrad.torch.nn.Embedding": 1,
        "torch.nn.SiLU -> tilegrad.torch.nn.SiLU": 2,
        "torch.nn.CrossEntropyLoss -> tilegrad.torch.nn.CrossEntropyLoss": 1,
        "torch.nn.BCEWithLogitsLoss -> tilegrad.torch.nn.BCEWithLogitsLoss": 1,
    }
    assert {r.path for r in summary} == {"embed_tokens", "layers.0.mlp.act_fn", "layers.1.mlp.act_fn", "loss_fn",
                                          "side_loss_fn"}
    text = str(summary)
    assert "layers.1.mlp.act_fn" in text and "tilegrad.torch.nn.SiLU" in text and "5 item(s)" in text
    assert type(model.embed_tokens) is tnn.Embedding and type(model.layers[0].mlp.act_fn) is tnn.SiLU
    assert type(model.loss_fn) is tnn.CrossEntropyLoss and type(model.side_loss_fn) is tnn.BCEWithLogitsLoss
    # same module objects, same Parameter objects, same state_dict; torch options kept
    assert [(n, id(p)) for n, p in model.named_parameters()] == before[1]
    assert model.loss_fn.label_smoothing == 0.05 and model.embed_tokens.padding_idx == 0
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert isinstance(model.embed_tokens, torch.nn.Embedding)

    restored = unpatch(model)
    assert len(restored) == 5 and "restored" in str(restored)
    assert snapshot(model) == before
    assert len(unpatch(model)) == 0  # nothing left to undo


def test_patch_flags_select_what_is_replaced():
    model = TinyLlama()
    summary = patch(model, silu=False, embedding=False, binary_cross_entropy_with_logits=False)
    assert [r.path for r in summary] == ["loss_fn"]
    more = patch(model)  # patching again adds only what is new
    assert sorted(r.path for r in more) == ["embed_tokens", "layers.0.mlp.act_fn", "layers.1.mlp.act_fn",
                                            "side_loss_fn"]
    assert len(unpatch(model)) == 5
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


def test_package_exposes_patch_functions():
    """``tgt.patch(model)`` is the README's one-line entry point: the package attribute must be the
    function, not the submodule ``tilegrad.torch.patch`` of the same name (importing the submodule binds
    that name on the package; ``__init__.py`` imports the functions eagerly so they win)."""
    import tilegrad.torch as tgt
    patch_module = importlib.import_module("tilegrad.torch.patch")  # the attribute `patch` is the function

    for name in ("patch", "unpatch", "enable", "disable", "PatchSummary"):
        assert getattr(tgt, name) is getattr(patch_module, name), name
    assert callable(tgt.patch)


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


def hf_forward(model, tokens, labels):
    return model(input_ids=tokens, labels=labels).loss


@pytest.mark.parametrize("model_type", sorted(CAUSAL_LM_FACTS))
def test_hf_causal_lm_patch_and_unpatch(model_type):
    model = tiny_causal_lm(model_type)
    before = snapshot(model)
    original_acts = [layer.mlp.act_fn for layer in model.model.layers]
    summary = patch(model)
    counts = summary.counts()
    assert counts["transformers.activations.SiLUActivation -> tilegrad.torch.nn.SiLU"] == 2
    assert counts["torch.nn.Embedding -> tilegrad.torch.nn.Embedding"] == 1
    assert "forward" in model.__dict__ and any(r.path.endswith("forward") for r in summary)
    assert [layer.mlp.act_fn for layer in model.model.layers] == original_acts  # same objects, new class
    assert type(model.model.embed_tokens) is tnn.Embedding

    tokens, labels = next(batches())
    model.train()
    head_calls = []
    hook = model.lm_head.register_forward_hook(lambda module, args, output: head_calls.append(output.shape))
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
    hook.remove()

    restored = unpatch(model)
    assert len(restored) == len(summary)
    assert snapshot(model) == before and "forward" not in model.__dict__


@pytest.mark.parametrize("model_type", sorted(CAUSAL_LM_FACTS))
def test_hf_causal_lm_training_gives_torch_losses(model_type):
    reference = tiny_causal_lm(model_type)
    patched = tiny_causal_lm(model_type)
    patched.load_state_dict(reference.state_dict())
    patch(patched)
    reference.train()
    patched.train()
    assert_losses_match(train(patched, forward=hf_forward), train(reference, forward=hf_forward))


def test_hf_causal_lm_loss_options_match_transformers():
    """num_items_in_batch (sum / count, as the Trainer passes it) and explicit shift_labels."""
    reference = tiny_causal_lm("llama")
    patched = tiny_causal_lm("llama")
    patched.load_state_dict(reference.state_dict())
    patch(patched)
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
    assert len(unpatch(clone)) == 4 and "forward" not in clone.__dict__
    assert "forward" in model.__dict__ and type(model.model.embed_tokens) is tnn.Embedding


def test_hf_causal_lm_with_tied_embeddings_trains_like_torch():
    """lm_head.weight is embed_tokens.weight: both tilegrad backward paths add into one Parameter."""
    reference = tiny_causal_lm("llama", tie_word_embeddings=True)
    patched = tiny_causal_lm("llama", tie_word_embeddings=True)
    patched.load_state_dict(reference.state_dict())
    assert patched.lm_head.weight is patched.model.embed_tokens.weight
    patch(patched)
    reference.train()
    patched.train()
    assert_losses_match(train(patched, forward=hf_forward), train(reference, forward=hf_forward))


def test_hf_causal_lm_bfloat16_loss_and_gradients_match_torch():
    """bfloat16 weights: one step's loss and lm_head gradient agree with the unpatched model to bf16 accuracy."""
    reference = tiny_causal_lm("llama", dtype=torch.bfloat16)
    patched = tiny_causal_lm("llama", dtype=torch.bfloat16)
    patched.load_state_dict(reference.state_dict())
    patch(patched)
    reference.train()
    patched.train()
    tokens, labels = next(batches())
    want, got = hf_forward(reference, tokens, labels), hf_forward(patched, tokens, labels)
    want.backward()
    got.backward()
    assert abs(got.item() - want.item()) <= 2 ** -7 * abs(want.item())
    g_want, g_got = reference.lm_head.weight.grad.double(), patched.lm_head.weight.grad.double()
    assert (g_got - g_want).abs().max() <= 2 ** -6 * g_want.abs().max()


def test_patching_an_inner_causal_lm_then_its_container_does_not_stack():
    """A causal LM patched on its own, then inside a container: one fused forward, each undone by its own
    unpatch, and the fallback path (eval) still reaches the model's own forward."""
    lm = tiny_causal_lm("llama")
    container = torch.nn.ModuleDict({"lm": lm})
    assert len(patch(lm)) == 4
    assert [r.path for r in patch(container)] == []  # everything in it is patched already
    lm.eval()
    tokens, _ = next(batches())
    assert lm(input_ids=tokens).logits.shape == (BATCH, SEQ, VOCAB)
    assert len(unpatch(container)) == 0 and len(unpatch(lm)) == 4 and "forward" not in lm.__dict__
