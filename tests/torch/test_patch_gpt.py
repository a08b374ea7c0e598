"""tilegrad.torch.patch on GPT-2 (``GPT2LMHeadModel``) and GPT-NeoX (Pythia) from small random configs
(hidden 64, 2 layers, vocabulary 256; no download): what is replaced (the LayerNorms with bias, the
MLP's GELU as tgt.gelu (GPT-2's ``gelu_new``: the tanh form; NeoX's ``gelu``: erf), NeoX's partial
rotary embedding, the attention, the fused loss with GPT-2's head tied to its embedding), that in
training with labels the fused path runs (``logits is None``), that the loss and every parameter
gradient equal the unpatched model's (fp32 1e-5 relative, bf16 within bf16 tolerance; NeoX with and
without its parallel residual, GPT-2 with its attention scaled by the inverse layer index), that 20
training steps track the unpatched model's, that unpatch restores every module, that the saved keys
are unchanged, that generate gives the same tokens, and that GPT-2's ``reorder_and_upcast_attn``,
whose attention is its own code, keeps the model's attention and is said."""

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_patching import (  # noqa: E402  (tests/torch is on sys.path: pytest's rootdir-relative imports)
    BF16_LOSS_RTOL, assert_losses_match, assert_patched_model_pickles_whole, assert_same_loss_and_gradients,
    batches, graph_node_names, has_fused_loss, snapshot, train)
import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _rope  # noqa: E402
from tilegrad.torch.patching import CAUSAL_LM_FACTS, patch, unpatch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py

VOCAB, HIDDEN, LAYERS = 256, 64, 2
FAMILIES = ["gpt2", "gpt_neox"]
PYTHIA_ROTARY = 0.25  # Pythia's rotary_pct: a quarter of each head rotates


def gpt_config(model_type, **overrides):
    """A small random config: 4 heads of 16; no dropout (both models must take the same steps); NeoX
    with Pythia's partial rotary embedding and an untied head."""
    if model_type == "gpt2":
        options = dict(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=4, n_positions=64, resid_pdrop=0.0,
                       embd_pdrop=0.0, attn_pdrop=0.0)
    else:
        options = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4,
                       intermediate_size=128, max_position_embeddings=64, tie_word_embeddings=False,
                       partial_rotary_factor=PYTHIA_ROTARY)
    options.update(attn_implementation="eager", **overrides)
    return transformers.AutoConfig.for_model(model_type, **options)


def gpt_model(model_type, dtype=torch.float32, seed=0, **overrides):
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(gpt_config(model_type, **overrides)).to(dtype).train()


def reference_and_patched(model_type, dtype=torch.float32, patch_options=None, **overrides):
    reference = gpt_model(model_type, dtype, **overrides)
    patched = copy.deepcopy(reference)
    summary = patch(patched, **(patch_options or {}))
    return reference, patched, summary


def forward(model, tokens, labels):
    return model(input_ids=tokens, labels=labels).loss


def counts(model, *names):
    return {name: sum(type(m).__name__ == name for m in model.modules()) for name in names}


# what each family's patch replaces: class names before -> after, and how many of each (2 layers)
REPLACED = {
    "gpt2": {"transformers.models.gpt2.modeling_gpt2.GPT2MLP -> tilegrad.torch.patching.TilegradGPT2MLP": 2,
             # c_attn, the attention's c_proj, c_fc, the MLP's c_proj
             "transformers.pytorch_utils.Conv1D -> tilegrad.torch.patching.TilegradConv1D": 4 * LAYERS,
             "torch.nn.LayerNorm -> tilegrad.torch.nn.LayerNorm": 2 * LAYERS + 1,
             "torch.nn.Embedding -> tilegrad.torch.nn.Embedding": 2},  # tokens, learned positions
    "gpt_neox": {
        "transformers.models.gpt_neox.modeling_gpt_neox.GPTNeoXMLP -> tilegrad.torch.patching.TilegradGPTNeoXMLP": 2,
        "transformers.models.gpt_neox.modeling_gpt_neox.GPTNeoXAttention -> "
        "tilegrad.torch.patching.TilegradGPTNeoXAttention": 2,
        "torch.nn.LayerNorm -> tilegrad.torch.nn.LayerNorm": 2 * LAYERS + 1,
        "torch.nn.Embedding -> tilegrad.torch.nn.Embedding": 1},
}
# the tilegrad autograd nodes each family's training loss must run through
NODES = {"gpt2": {"TilegradLayerNormBackward", "TilegradGeluBackward", "TilegradLinearBackward",
                  "LinearCrossEntropyFunctionBackward"},
         "gpt_neox": {"TilegradLayerNormBackward", "TilegradGeluBackward", "TilegradRopeBackward",
                      "LinearCrossEntropyFunctionBackward"}}


def test_gpt_families_are_in_the_facts_table():
    assert CAUSAL_LM_FACTS["gpt2"].decoder == "transformer"
    assert CAUSAL_LM_FACTS["gpt_neox"].decoder == "gpt_neox"


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_blocks_run_on_tilegrad_and_unpatch_restores_them(model_type):
    """Every LayerNorm, MLP and (NeoX) rotary attention becomes tilegrad's (same state_dict keys), the
    attention implementation is tilegrad's and the loss is fused; the summary says so; the loss's graph
    runs tilegrad's LayerNorm, GELU, rotary and fused-loss nodes with logits None; unpatch restores
    every module and attribute."""
    model = gpt_model(model_type)
    tokens, labels = next(batches())
    model(input_ids=tokens)  # the first forward installs transformers' output-capturing hooks
    before, keys = snapshot(model), list(model.state_dict())
    summary = patch(model)
    assert summary.skipped == [] and has_fused_loss(model)
    for key, count in REPLACED[model_type].items():
        assert summary.counts().get(key) == count, (key, summary.counts())
    text = str(summary)
    assert "'tilegrad' (tgt.scaled_dot_product_attention)" in text
    assert "tilegrad fused linear cross entropy" in text
    assert list(model.state_dict()) == keys

    out = model(input_ids=tokens, labels=labels)
    assert out.logits is None
    nodes = set(graph_node_names(out.loss))
    assert NODES[model_type] <= nodes, NODES[model_type] - nodes

    restored = unpatch(model)
    assert len(restored) == len(summary)
    assert snapshot(model) == before
    assert not any(type(m).__module__.startswith("tilegrad") for m in model.modules())
    assert model.config._attn_implementation == "eager"


# each family's variants: NeoX's residual sequential as well as parallel (Pythia's), and its rotary
# embedding over half the head
VARIANTS = [("gpt2", {}), ("gpt_neox", {}), ("gpt_neox", dict(use_parallel_residual=False)),
            ("gpt_neox", dict(partial_rotary_factor=0.5))]


@pytest.mark.parametrize("model_type, overrides", VARIANTS, ids=lambda v: str(v) if v else "default")
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_loss_and_every_gradient_equal_the_unpatched_models(request, model_type, overrides, on_kernel, dtype):
    """One training step with labels (some ignored): the fused path (logits None), the loss and every
    parameter's gradient (GPT-2's tied embedding gets the head's gradient and its own) equal the
    unpatched model's, fp32 to 1e-5 and bf16 within bf16 tolerance, on torch's composites and on the
    kernels."""
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    reference, patched, summary = reference_and_patched(model_type, dtype, **overrides)
    assert summary.skipped == []
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    want = reference(input_ids=tokens, labels=labels)
    assert got.logits is None and want.logits is not None
    assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, dtype)


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_training_follows_the_unpatched_model(model_type):
    """20 AdamW steps, float32: the patched model's losses track the unpatched model's (1e-4)."""
    reference, patched, _ = reference_and_patched(model_type)
    assert_losses_match(train(patched, forward=forward), train(reference, forward=forward))


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_bfloat16_training_follows_the_unpatched_model(model_type):
    """20 AdamW steps with bf16 weights (the attention the model's own, as test_patching's bf16 test):
    the patched model's losses stay within bf16 tolerance of the unpatched model's."""
    reference, patched, _ = reference_and_patched(model_type, torch.bfloat16, patch_options=dict(attention=False))
    want = train(reference, forward=forward)
    got = train(patched, forward=forward)
    assert want[-1] < want[0] and got[-1] < got[0]
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= BF16_LOSS_RTOL * abs(b), f"step {step}: patched {a} vs torch {b}"


@pytest.mark.parametrize("model_type", FAMILIES)
def test_saves_the_same_keys_and_generates_the_same_tokens(model_type, tmp_path):
    """save_pretrained of a patched model writes the unpatched model's keys (GPT-2's tied head not
    among them) and architecture; greedy generate after patching gives the unpatched model's tokens."""
    import json
    from safetensors import safe_open
    reference, patched, _ = reference_and_patched(model_type)
    reference.save_pretrained(tmp_path / "reference")
    patched.save_pretrained(tmp_path / "patched")
    assert json.loads((tmp_path / "patched" / "config.json").read_text())["architectures"] == \
        json.loads((tmp_path / "reference" / "config.json").read_text())["architectures"]
    with safe_open(tmp_path / "reference" / "model.safetensors", "pt") as want, \
            safe_open(tmp_path / "patched" / "model.safetensors", "pt") as got:
        assert sorted(got.keys()) == sorted(want.keys())
    reference.eval()
    patched.eval()
    prompt = next(batches())[0][:, :5]
    options = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(patched.generate(prompt, **options), reference.generate(prompt, **options))


@pytest.mark.parametrize("model_type", FAMILIES)
def test_padded_batch_gives_the_unpatched_loss(model_type):
    """An attention mask with left padding: tilegrad's attention takes the mask, and the loss and
    gradients equal the unpatched model's. The padded positions predict nothing (their labels and the
    first real token's are ignored): a fully masked query row is an average of every key in eager
    attention and 0 in tilegrad's and SDPA's."""
    reference, patched, _ = reference_and_patched(model_type)
    tokens, labels = next(batches())
    mask = torch.ones_like(tokens)
    mask[0, :4] = 0
    labels[0, :5] = -100
    got = patched(input_ids=tokens, labels=labels, attention_mask=mask)
    want = reference(input_ids=tokens, labels=labels, attention_mask=mask)
    assert got.logits is None
    assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, torch.float32)


# ----------------------------------------------------------------------------------------------
# what patch leaves as it was, and says


def test_gpt2_reorder_and_upcast_attn_keeps_its_own_attention_and_says_so():
    """GPT-2's reorder_and_upcast_attn runs its own attention code under eager attention: the
    attention stays the model's (a warning names the flag), the rest is patched, the loss is the same."""
    reference = gpt_model("gpt2", reorder_and_upcast_attn=True)
    patched = copy.deepcopy(reference)
    with pytest.warns(UserWarning, match="reorder_and_upcast_attn=True.*own attention runs"):
        summary = patch(patched)
    assert len(summary.skipped) == 1 and "reorder_and_upcast_attn" in str(summary)
    assert patched.config._attn_implementation == "eager" and has_fused_loss(patched)
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert got.logits is None
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)
    unpatch(patched)
    assert patched.config._attn_implementation == "eager"


@pytest.mark.parametrize("scale", [dict(scale_attn_by_inverse_layer_idx=True), dict(scale_attn_weights=False)],
                         ids=["by_inverse_layer_idx", "unscaled"])
def test_gpt2_attention_scale_flags_are_computed_as_the_model_does(scale):
    """GPT-2's attention divided by the layer index too, or not scaled at all: where the installed
    transformers hands that scale to the attention implementation (``scaling`` on the module, 5.x
    releases after 5.0) tilegrad's attention computes it; where it applies it in its eager attention
    only (5.0) the attention stays the model's own and a warning says why. Either way the loss and
    every gradient equal the unpatched model's."""
    reference = gpt_model("gpt2", **scale)
    patched = copy.deepcopy(reference)
    handed_on = hasattr(reference.transformer.h[0].attn, "scaling")
    if handed_on:
        summary = patch(patched)
        assert summary.skipped == [] and patched.config._attn_implementation == "tilegrad"
    else:
        with pytest.warns(UserWarning, match="scale_attn_by_inverse_layer_idx / scale_attn_weights"):
            summary = patch(patched)
        assert len(summary.skipped) == 1 and patched.config._attn_implementation == "eager"
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert got.logits is None
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


@pytest.mark.parametrize("model_type, activation", [("gpt2", dict(activation_function="relu")),
                                                    ("gpt_neox", dict(hidden_act="silu"))])
def test_mlp_with_another_activation_keeps_its_own_forward(model_type, activation):
    """An MLP whose activation is not a GELU runs the model's own forward (no GELU node), same loss."""
    reference, patched, _ = reference_and_patched(model_type, **activation)
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert "TilegradGeluBackward" not in set(graph_node_names(got.loss))
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_gpt2_conv1d_gradients_reach_their_parameters_in_place():
    """GPT-2's Conv1D layers ([in, out] weights) run tgt.linear on the weight read transposed: the
    loss and gradients equal the unpatched model's (test above), and each weight's gradient comes back
    in the parameter's own layout, so autograd stores it without a copy."""
    _, patched, _ = reference_and_patched("gpt2")
    conv1d = [m for m in patched.modules() if type(m).__name__ == "TilegradConv1D"]
    assert len(conv1d) == 4 * LAYERS
    module = conv1d[0]
    x = torch.randn(2, 5, module.nx)
    weight_t = module.weight.t()  # what the patched forward hands tgt.linear
    out = tgt.linear(x, weight_t, module.bias)
    assert "TilegradLinearBackward" in set(graph_node_names(out.sum()))
    (grad,) = torch.autograd.grad(out, [weight_t], torch.randn_like(out))
    assert grad.shape == weight_t.shape and grad.stride() == weight_t.stride() == (1, module.nf)
    assert grad.t().is_contiguous()


def test_linear_false_leaves_the_conv1d_layers_alone():
    model = gpt_model("gpt2")
    summary = patch(model, linear=False)
    assert not any("Conv1D" in r.after for r in summary)
    assert counts(model, "Conv1D") == {"Conv1D": 4 * LAYERS}


def test_gelu_false_leaves_the_mlps_alone():
    model = gpt_model("gpt2")
    summary = patch(model, gelu=False)
    assert not any("MLP" in r.after for r in summary) and counts(model, "GPT2MLP") == {"GPT2MLP": LAYERS}
    unpatch(model)
    with pytest.raises(TypeError, match="gelu must be True or False"):
        patch(model, gelu="yes")


# ----------------------------------------------------------------------------------------------
# the pieces against float64 written from the definitions


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("partial_rotary_factor", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_apply_rotary_pos_emb_matches_neox_partial_rotary(partial_rotary_factor, dtype):
    """tgt.apply_rotary_pos_emb with cos / sin over the first rotary_ndims features (NeoX's partial
    rotary, on q / k chunked out of one qkv projection: not contiguous) rotates those and passes the
    rest, as NeoX's own function computed in float64: values and gradients."""
    from transformers.models.gpt_neox import modeling_gpt_neox
    head_dim = 16
    rotary_dim = int(head_dim * partial_rotary_factor)
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 4, 7, 3 * head_dim, generator=g).to(dtype).requires_grad_()
    q, k, _ = qkv.chunk(3, dim=-1)
    angles = torch.randn(2, 7, rotary_dim // 2, generator=g).repeat(1, 1, 2)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    got = _rope.apply_rotary_pos_emb(q, k, cos, sin)
    qkv64 = qkv.detach().double().requires_grad_()
    q64, k64, _ = qkv64.chunk(3, dim=-1)
    want = modeling_gpt_neox.apply_rotary_pos_emb(q64, k64, cos.double(), sin.double())
    # bf16: inputs and results rounded to 8 bits, values up to about 4 (one step there is 2^-6)
    tolerance = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=2 ** -7, atol=2 ** -6)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, **tolerance)
    weights = [torch.randn(t.shape, generator=g, dtype=torch.float64) for t in got]
    sum((a.double() * w).sum() for a, w in zip(got, weights)).backward()
    sum((b * w).sum() for b, w in zip(want, weights)).backward()
    torch.testing.assert_close(qkv.grad.double(), qkv64.grad, **tolerance)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_gpt2_mlp_computes_gelu_new_of_its_definition():
    """GPT-2's patched MLP against its definition in float64: c_proj(0.5 x (1 + tanh(sqrt(2 / pi) (x +
    0.044715 x^3)))) of x = c_fc(h), Conv1D being h @ W + b."""
    import math
    model = gpt_model("gpt2")
    patch(model)
    mlp = model.transformer.h[0].mlp
    h = torch.randn(3, 5, HIDDEN, generator=torch.Generator().manual_seed(2))
    x = h.double() @ mlp.c_fc.weight.double() + mlp.c_fc.bias.double()
    gelu_new = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    want = gelu_new @ mlp.c_proj.weight.double() + mlp.c_proj.bias.double()
    out = mlp(h)
    assert "TilegradGeluBackward" in set(graph_node_names(out.sum()))
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("contiguous_input", [True, False])
def test_tilegrad_conv1d_matches_float64_of_its_definition(contiguous_input):
    """TilegradConv1D against Conv1D's definition y = x @ W + b (W of [in, out]) in float64: the output
    and the gradients of x, W and b, with a batch of sequences (3-D input), contiguous or not."""
    from transformers.pytorch_utils import Conv1D
    from tilegrad.torch.patching import _tilegrad_subclass
    torch.manual_seed(3)
    layer = Conv1D(48, 40)
    with torch.no_grad():
        layer.bias.normal_()
    layer.__class__ = _tilegrad_subclass(Conv1D, "Conv1D")
    x = torch.randn(3, 40, 7).transpose(1, 2) if not contiguous_input else torch.randn(3, 7, 40)
    x.requires_grad_()
    upstream = torch.randn(3, 7, 48)
    y = layer(x)
    y.backward(upstream)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, layer.weight, layer.bias))
    y64 = x64 @ w64 + b64
    y64.backward(upstream.double())
    torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-5)
    for got, want in ((x.grad, x64.grad), (layer.weight.grad, w64.grad), (layer.bias.grad, b64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_patched_model_pickles_whole(model_type):
    """torch.save / torch.load of a patched model: the same tilegrad classes (the MLP's among them) and
    the same loss."""
    model = gpt_model(model_type)
    patch(model)
    assert any(type(m).__name__ == f"Tilegrad{CAUSAL_LM_FACTS[model_type].prefix}MLP" for m in model.modules())
    assert_patched_model_pickles_whole(model)
