"""tilegrad.torch.patch on Gemma, Gemma 2 and Gemma 3 (text) causal LMs from small random configs (hidden
64, 2 layers, vocabulary 256; no download): what is replaced (Gemma's RMSNorm ``x * rstd * (1 + w)``
as rms_norm with weight_offset=1 (Gemma 3's q / k norms too), the MLP's ``gelu_pytorch_tanh(gate) *
up`` as gelu_mul, the rotary embedding, the scaled embedding, the fused loss with Gemma 2 / 3's final
logit softcap), that in training with labels the fused path runs (``logits is None``), that the loss
and every parameter gradient equal the unpatched model's (fp32 1e-5 relative, bf16 within bf16
tolerance), that 20 training steps track the unpatched model's, that unpatch restores every module,
that the saved keys are unchanged, that generate works, and that Gemma 2's attention softcap, which
tilegrad's attention does not compute, keeps the model's own attention and is said."""

import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tilegrad.torch.patching import CAUSAL_LM_FACTS, patch, unpatch  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py

VOCAB, HIDDEN, SEQ, BATCH, STEPS = 256, 64, 12, 2, 20
FAMILIES = ["gemma", "gemma2", "gemma3_text"]
# the loss and each gradient, relative to the reference's largest magnitude (as tests/torch/test_patching.py):
# float32 summation order; bfloat16 a few ulps (tilegrad rounds the norm, the GeGLU and the loss once)
LOSS_RTOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -8}
GRAD_RTOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -5}
# with a final logit softcap transformers rounds the bf16 logits three times more (z / c, tanh, * c)
# where tilegrad caps them in float32: one bf16 ulp more on the gradients (measured 3.2%)
SOFTCAP_BF16_GRAD_RTOL = 2 ** -4
STEP_LOSS_RTOL = 1e-4  # 20 float32 AdamW steps: tilegrad and torch sum in different orders


def gemma_config(model_type, **overrides):
    """A small random config of the family: 4 query heads and 2 key-value heads of 16, a sliding window
    shorter than the sequence (Gemma 2 / 3 alternate sliding and full layers), the family's defaults for
    the rest (Gemma 2: final and attention logit softcaps 30 and 50)."""
    options = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                   attn_implementation="eager")
    if model_type != "gemma":
        options.update(query_pre_attn_scalar=16, sliding_window=8)
    options.update(overrides)
    return transformers.AutoConfig.for_model(model_type, **options)


def gemma_model(model_type, dtype=torch.float32, seed=0, **overrides):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(gemma_config(model_type, **overrides)).to(dtype)
    return model.train()


def reference_and_patched(model_type, dtype=torch.float32, **overrides):
    reference = gemma_model(model_type, dtype, **overrides)
    patched = copy.deepcopy(reference)
    summary = patch(patched)
    return reference, patched, summary


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = tokens.clone()
    labels[0, :3] = -100  # some ignored positions
    return tokens, labels


def snapshot(model):
    return [(name, type(m)) for name, m in model.named_modules()]


def assert_same_loss_and_gradients(got, want, patched, reference, dtype, grad_rtol=None):
    grad_rtol = grad_rtol or GRAD_RTOL[dtype]
    assert got.dtype == want.dtype == torch.float32
    assert abs(got.item() - want.item()) <= LOSS_RTOL[dtype] * abs(want.item()), (got.item(), want.item())
    got.backward()
    want.backward()
    grads = dict(reference.named_parameters())
    for name, p in patched.named_parameters():
        expected = grads[name].grad.double()
        assert p.grad is not None, name
        scale = expected.abs().max().item()
        err = (p.grad.double() - expected).abs().max().item()
        assert err <= grad_rtol * scale, f"{name}: {err} > {grad_rtol} * {scale}"


# ----------------------------------------------------------------------------------------------
# what is replaced, and unpatch


def _counts(summary, kind):
    return sum(n for key, n in summary.counts().items() if key.endswith(kind))


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_patch_replaces_gemmas_blocks_and_unpatch_restores_them(model_type):
    model = gemma_model(model_type, final_logit_softcapping=None, attn_logit_softcapping=None)
    before, keys = snapshot(model), list(model.state_dict())
    prefix = CAUSAL_LM_FACTS[model_type].prefix
    summary = patch(model)
    assert not summary.skipped
    norms_per_layer = {"gemma": 2, "gemma2": 4, "gemma3_text": 6}[model_type]  # Gemma 3: q_norm, k_norm too
    assert _counts(summary, f"Tilegrad{prefix}RMSNorm") == 2 * norms_per_layer + 1
    assert _counts(summary, f"Tilegrad{prefix}MLP") == 2
    assert _counts(summary, f"Tilegrad{prefix}Attention") == 2
    embedding = model.model.embed_tokens
    assert type(embedding).__name__ in (f"Tilegrad{prefix}TextScaledWordEmbedding", "Embedding")
    assert list(model.state_dict()) == keys

    tokens, labels = batch()
    out = model(input_ids=tokens, labels=labels)
    assert out.logits is None and out.loss.dtype == torch.float32  # the fused loss
    nodes = autograd_node_names(out.loss)
    want = {"TilegradRmsNormBackward", "TilegradRopeBackward", "LinearCrossEntropyFunctionBackward",
            "TilegradGeluMulBackward"}
    assert want <= nodes, nodes

    restored = unpatch(model)
    assert len(restored) == len(summary) and snapshot(model) == before


@pytest.mark.usefixtures("kernels_at_every_size")
def test_gemma_with_silu_runs_silu_mul():
    """Another activation torch has fused in tilegrad: a Gemma built with SiLU runs silu_mul."""
    reference, patched, summary = reference_and_patched("gemma", hidden_act="silu")
    tokens, labels = batch()
    got = patched(input_ids=tokens, labels=labels)
    assert "TilegradSiluMulBackward" in autograd_node_names(got.loss)
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


def test_an_mlp_with_another_activation_keeps_its_own_forward():
    """gelu_python_tanh (a Python formula, not torch's gelu) is not mapped: the MLP's own forward runs."""
    reference, patched, _ = reference_and_patched("gemma2", hidden_activation="gelu_python_tanh")
    tokens, labels = batch()
    got = patched(input_ids=tokens, labels=labels)
    assert "TilegradGeluMulBackward" not in autograd_node_names(got.loss)
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


def test_gemma2_attention_softcap_stays_on_the_models_attention_and_is_said():
    model = gemma_model("gemma2")
    assert model.config.attn_logit_softcapping == 50.0 and model.config.final_logit_softcapping == 30.0
    with pytest.warns(UserWarning, match="attn_logit_softcapping=50.0: tilegrad's attention has no logit softcap"):
        summary = patch(model)
    assert [s.path for s in summary.skipped] == ["<model>.config._attn_implementation"]
    assert model.config._attn_implementation == "eager"  # its own attention, softcap included
    assert "left as it was (1)" in str(summary)
    tokens, labels = batch()
    assert model(input_ids=tokens, labels=labels).logits is None  # the loss is fused all the same
    unpatch(model)


# ----------------------------------------------------------------------------------------------
# the same loss and gradients, the same training


CASES = [("gemma", {}), ("gemma2", {}), ("gemma2", {"attn_logit_softcapping": None}), ("gemma3_text", {}),
         ("gemma3_text", {"final_logit_softcapping": 30.0})]
CASE_IDS = ["gemma", "gemma2", "gemma2-tilegrad-attention", "gemma3", "gemma3-softcap"]


@pytest.mark.filterwarnings("ignore:tilegrad.torch.patch")  # Gemma 2's attention softcap, said above
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("model_type,overrides", CASES, ids=CASE_IDS)
def test_loss_and_every_gradient_equal_the_unpatched_models(request, model_type, overrides, dtype, on_kernel):
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    reference, patched, _ = reference_and_patched(model_type, dtype, **overrides)
    tokens, labels = batch()
    got = patched(input_ids=tokens, labels=labels)
    assert got.logits is None  # the fused path
    want = reference(input_ids=tokens, labels=labels)
    softcapped = getattr(reference.config, "final_logit_softcapping", None) is not None and dtype == torch.bfloat16
    assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, dtype,
                                   SOFTCAP_BF16_GRAD_RTOL if softcapped else None)


def train(model, steps=STEPS):
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    losses = []
    for step in range(steps):
        tokens, labels = batch(seed=100 + step % 2)  # two batches again and again: a loss that falls
        loss = model(input_ids=tokens, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.filterwarnings("ignore:tilegrad.torch.patch")
@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_twenty_training_steps_track_the_unpatched_model(model_type):
    reference, patched, _ = reference_and_patched(model_type)
    got, want = train(patched), train(reference)
    assert want[-1] < want[0]  # it learns
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= STEP_LOSS_RTOL * abs(b), (step, a, b)


# ----------------------------------------------------------------------------------------------
# saving and generating


@pytest.mark.filterwarnings("ignore:tilegrad.torch.patch")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_save_pretrained_keys_and_generate_are_unchanged(model_type, tmp_path):
    from safetensors import safe_open

    reference, patched, _ = reference_and_patched(model_type)
    for name, model in (("reference", reference), ("patched", patched)):
        model.save_pretrained(tmp_path / name)
    keys = {}
    for name in ("reference", "patched"):
        with safe_open(str(tmp_path / name / "model.safetensors"), "pt") as f:
            keys[name] = sorted(f.keys())
    assert keys["patched"] == keys["reference"] and keys["patched"]
    saved = json.loads((tmp_path / "patched" / "config.json").read_text())
    assert saved["architectures"] == [type(reference).__name__]

    reference.eval()
    patched.eval()
    prompt = batch()[0][:1, :5]
    options = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    got = patched.generate(prompt, **options)
    assert got.shape == (1, 11)
    assert torch.equal(got, reference.generate(prompt, **options))
