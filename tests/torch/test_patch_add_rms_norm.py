"""patch(model, add_rms_norm=True): in the Llama / Mistral / Qwen2 / Qwen3 decoder layers of Hugging Face
models built from tiny configs (no download), ``residual + attention output`` and the post-attention
RMSNorm run as one tgt.add_rms_norm. The loss and every parameter gradient equal the unpatched
model's, with and without the fusion, on the kernels and on the composite; unpatch restores the
classes; saved checkpoints, generation, pickling, autocast and hooks are unchanged; layers it cannot
fuse are left as they were, and said."""

import io
import json
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import patching  # noqa: E402
from tilegrad.torch.patching import CAUSAL_LM_FACTS, patch, unpatch  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402  (tests/torch/conftest.py)
from reference.torch_compare import assert_same_loss_and_gradients as same_loss_and_gradients  # noqa: E402

VOCAB, HIDDEN, SEQ, BATCH, LAYERS = 96, 32, 12, 3, 2
# every other patch off: the fused residual add alone against the unpatched model
ONLY_ADD_RMS_NORM = dict(silu=False, embedding=False, cross_entropy=False, binary_cross_entropy_with_logits=False,
                         linear_cross_entropy=False, rms_norm=False, swiglu=False, rope=False, attention=False,
                         linear=False)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_causal_lm(model_type, dtype=torch.float32, seed=0):
    config = transformers.AutoConfig.for_model(
        model_type, vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, hidden_act="silu",
        tie_word_embeddings=False, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(dtype)
    with torch.no_grad():  # weights away from 1, so a norm's weight gradient and value both matter
        for name, p in model.named_parameters():
            if "layernorm" in name:
                p.uniform_(0.5, 1.5)
    return model.train()


def twins(model_type, dtype=torch.float32, **options):
    """An unpatched model and a patched copy with the same weights (both training)."""
    reference = tiny_causal_lm(model_type, dtype)
    patched = tiny_causal_lm(model_type, dtype)
    patched.load_state_dict(reference.state_dict())
    summary = patch(patched, **options)
    return reference, patched, summary


def tokens_and_labels():
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return tokens, tokens.clone()


def layer_key(model_type):
    prefix = CAUSAL_LM_FACTS[model_type].prefix
    return (f"transformers.models.{model_type}.modeling_{model_type}.{prefix}DecoderLayer -> "
            f"tilegrad.torch.patching.Tilegrad{prefix}DecoderLayer")


def assert_same_loss_and_gradients(patched, reference, dtype, **forward_options):
    """One training step of both on the same batch: the same loss and every parameter gradient."""
    tokens, labels = tokens_and_labels()
    got = patched(input_ids=tokens, labels=labels, **forward_options).loss
    want = reference(input_ids=tokens, labels=labels, **forward_options).loss
    same_loss_and_gradients(got, want, patched, reference, dtype)
    return got


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", sorted(t for t, f in CAUSAL_LM_FACTS.items() if f.residual_add_norm))
def test_decoder_layers_are_swapped_run_add_rms_norm_and_unpatch_restores_them(model_type):
    model = tiny_causal_lm(model_type)
    library = type(model.model.layers[0])
    keys = list(model.state_dict())
    summary = patch(model)
    assert summary.counts()[layer_key(model_type)] == LAYERS
    assert "DecoderLayer -> tilegrad.torch.patching.Tilegrad" in str(summary)
    assert all(type(layer).__bases__ == (library,) for layer in model.model.layers)
    assert list(model.state_dict()) == keys
    tokens, labels = tokens_and_labels()
    nodes = autograd_node_names(model(input_ids=tokens, labels=labels).loss)
    assert "TilegradAddRmsNormBackward" in nodes, nodes
    unpatch(model)
    assert all(type(layer) is library for layer in model.model.layers)
    assert "TilegradAddRmsNormBackward" not in autograd_node_names(model(input_ids=tokens, labels=labels).loss)


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
@pytest.mark.parametrize("options", [{}, {"add_rms_norm": False}, ONLY_ADD_RMS_NORM],
                         ids=["everything", "without_add_rms_norm", "only_add_rms_norm"])
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
def test_loss_and_every_gradient_equal_the_unpatched_models(request, model_type, options, on_kernel):
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    reference, patched, summary = twins(model_type, **options)
    fused = options.get("add_rms_norm", True)
    assert (layer_key(model_type) in summary.counts()) == fused
    loss = assert_same_loss_and_gradients(patched, reference, torch.float32)
    if fused and on_kernel:
        assert "TilegradAddRmsNormBackward" in autograd_node_names(loss)


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_bfloat16_loss_and_gradients_follow_the_unpatched_model(model_type):
    reference, patched, _ = twins(model_type, torch.bfloat16)
    assert_same_loss_and_gradients(patched, reference, torch.bfloat16)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_autocast_mixed_dtypes_are_added_as_torch_promotes_them():
    """Under bf16 autocast the residual stream is float32 and the attention output bfloat16: the sum
    is float32, as torch's add gives it."""
    reference, patched, _ = twins("llama", **ONLY_ADD_RMS_NORM)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = assert_same_loss_and_gradients(patched, reference, torch.float32)
    assert "TilegradAddRmsNormBackward" in autograd_node_names(loss)


def test_a_hook_on_the_post_attention_norm_runs_the_librarys_steps():
    reference, patched, _ = twins("llama", **ONLY_ADD_RMS_NORM)
    seen = []
    patched.model.layers[0].post_attention_layernorm.register_forward_hook(lambda m, a, out: seen.append(out.shape))
    assert_same_loss_and_gradients(patched, reference, torch.float32)
    assert seen == [(BATCH, SEQ, HIDDEN)]


def test_flag_off_patch_again_and_bad_flag():
    model = tiny_causal_lm("llama")
    assert layer_key("llama") not in patch(model, add_rms_norm=False).counts()
    assert patch(model).counts()[layer_key("llama")] == LAYERS
    assert layer_key("llama") not in patch(model).counts()  # patched already: nothing new
    with pytest.raises(TypeError, match="add_rms_norm must be True or False"):
        patch(model, add_rms_norm=1)


def test_saved_checkpoint_is_the_unpatched_models(tmp_path):
    from safetensors.torch import load_file
    reference, patched, _ = twins("llama")
    reference.save_pretrained(tmp_path / "reference")
    patched.save_pretrained(tmp_path / "patched")
    want, got = (load_file(tmp_path / name / "model.safetensors") for name in ("reference", "patched"))
    assert sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)
    config = json.loads((tmp_path / "patched" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_generate_gives_the_unpatched_models_tokens(model_type):
    """Generation passes the cache through every layer: the same greedy tokens and cache length."""
    reference, patched, _ = twins(model_type)
    reference.eval()
    patched.eval()
    prompt = tokens_and_labels()[0][:1, :5]
    want = reference.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
    got = patched.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(got, want) and got.shape == (1, 11)
    with torch.no_grad():
        out = patched(input_ids=prompt, use_cache=True)
        want_out = reference(input_ids=prompt, use_cache=True)
    assert out.past_key_values.get_seq_length() == want_out.past_key_values.get_seq_length() == 5
    torch.testing.assert_close(out.logits, want_out.logits, rtol=1e-5, atol=1e-5)


def test_patched_model_pickles_whole():
    model = tiny_causal_lm("qwen3")
    patch(model, **ONLY_ADD_RMS_NORM)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded.model.layers[0]) is type(model.model.layers[0]) is patching.TilegradQwen3DecoderLayer
    model.eval()
    loaded.eval()
    tokens = tokens_and_labels()[0]
    torch.testing.assert_close(loaded(input_ids=tokens).logits, model(input_ids=tokens).logits, rtol=0, atol=0)


def _warnings_of_patch(model, **options):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        summary = patch(model, **options)
    return summary, [str(w.message) for w in record if issubclass(w.category, UserWarning)]


def test_a_layer_subclass_overriding_forward_is_left_as_it_was_and_said():
    library = transformers.models.llama.modeling_llama.LlamaDecoderLayer

    class ScaledLayer(library):
        def forward(self, hidden_states, **kwargs):
            return 2 * super().forward(hidden_states, **kwargs)

    model = tiny_causal_lm("llama")
    for layer in model.model.layers:
        layer.__class__ = ScaledLayer
    summary, messages = _warnings_of_patch(model)
    assert len(summary.skipped) == LAYERS and len(messages) == LAYERS, messages
    assert "ScaledLayer overrides LlamaDecoderLayer.forward" in messages[0]
    assert "residual add is not fused" in messages[0]
    assert all(type(layer) is ScaledLayer for layer in model.model.layers)
    unpatch(model)
    with pytest.raises(ValueError, match="strict=True.*ScaledLayer overrides"):
        patch(model, strict=True)


def test_a_post_attention_norm_that_is_not_rms_norm_is_said():
    model = tiny_causal_lm("llama")
    model.model.layers[1].post_attention_layernorm = torch.nn.LayerNorm(HIDDEN)
    summary, messages = _warnings_of_patch(model, **ONLY_ADD_RMS_NORM)
    assert summary.counts()[layer_key("llama")] == 1
    assert [s.path for s in summary.skipped] == ["model.layers.1"]
    assert "post_attention_layernorm is LayerNorm, not LlamaRMSNorm" in messages[0]


def test_a_library_forward_with_another_body_is_not_fused():
    """Another release's body (here: a scaled residual) is refused by the source comparison; the
    installed one is accepted, with its own parameter names."""
    library = transformers.models.llama.modeling_llama.LlamaDecoderLayer
    assert isinstance(patching._layer_call(library), patching._LayerCall)

    def scaled(self, hidden_states, attention_mask=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask, **kwargs)
        hidden_states = residual + 0.5 * hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states

    def pattern(self, hidden_states, mask=None, *, cache=None, **extra):
        """Another release's parameters, the same body."""
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        # comments and keyword order change nothing
        hidden_states, _ = self.self_attn(cache=cache, hidden_states=hidden_states, mask=mask, **extra)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states

    other = type("LlamaDecoderLayer", (library,), {"forward": scaled})
    assert "is not the residual pattern tilegrad fuses" in patching._layer_call(other)
    same = patching._layer_call(type("LlamaDecoderLayer", (library,), {"forward": pattern}))
    assert same == patching._LayerCall(("mask",), {"mask": None, "cache": None})
    assert same.attention_kwargs((1,), {"cache": 2, "output": 3}) == {"mask": 1, "cache": 2, "output": 3}
    assert same.attention_kwargs((1, 2), {}) is None and same.attention_kwargs((1,), {"mask": 1}) is None


def test_patched_forward_keeps_the_librarys_signature():
    import inspect
    library = transformers.models.llama.modeling_llama.LlamaDecoderLayer
    made = patching._tilegrad_subclass(library, "DecoderLayer")
    assert inspect.signature(made.forward) == inspect.signature(library.forward)
    assert made.forward is not library.forward


def test_exported_function_is_the_one_patch_uses():
    assert tgt.add_rms_norm is patching._add_rms_norm.add_rms_norm
