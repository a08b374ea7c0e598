"""tilegrad.torch.patch on the causal-LM families beyond Llama / Mistral / Qwen2 / Qwen3: Phi-3 (one
gate_up projection, partial rotary), OLMo2 (q / k norms over the whole projection, norms after
attention and MLP), Granite (embedding / residual / attention multipliers, logits divided by
``logits_scaling``) and the mixtures of experts Mixtral, Qwen2-MoE and Qwen3-MoE (experts with 3-D
weights behind a router, the router's auxiliary loss in the loss). Each from a small random config (no
download), against the same model unpatched: the fused path runs in training with labels, the loss
and every parameter gradient equal the unpatched model's, 20 training steps track it, unpatch
restores every module, save_pretrained writes the same keys and generate gives the same tokens."""

import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_patching import (  # noqa: E402  (tests/torch is on sys.path: pytest's rootdir-relative imports)
    BF16_LOSS_RTOL, PATCHED_LOSS_RTOL, assert_patched_model_pickles_whole, assert_same_loss_and_gradients, batches,
    graph_node_names, has_fused_loss, snapshot, train)
from tilegrad.torch import _rope  # noqa: E402
from tilegrad.torch.patching import CAUSAL_LM_FACTS, patch, unpatch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py

VOCAB, HIDDEN = 256, 64
MOE = ("mixtral", "qwen2_moe", "qwen3_moe")

# what each family's small config sets beyond the shared sizes: every feature the family's patch
# must keep (Phi-3's partial rotary, Granite's four multipliers with a divisor that is not a power of
# two, the mixtures' experts, shared expert and dense layer, a router loss coefficient large enough
# to move the loss)
FAMILY_CONFIG = {
    "phi3": dict(pad_token_id=0, partial_rotary_factor=0.5),
    "olmo2": dict(pad_token_id=0),
    "granite": dict(embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=3.0),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=0.1, output_router_logits=True),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=64, router_aux_loss_coef=0.1, output_router_logits=True),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, mlp_only_layers=[1],
                      router_aux_loss_coef=0.1, output_router_logits=True),
}
FAMILIES = sorted(FAMILY_CONFIG)

# the decoder-block classes each family's patch replaces (suffix after the family's prefix)
BLOCKS = {model_type: [suffix for suffix, _ in CAUSAL_LM_FACTS[model_type].blocks] for model_type in FAMILIES}


def family_model(model_type, dtype=torch.float32, seed=0, **overrides):
    """A small random causal LM of the family (2 layers, hidden 64, vocab 256), eager attention."""
    options = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, hidden_act="silu",
                   tie_word_embeddings=False, attn_implementation="eager")
    options.update(FAMILY_CONFIG[model_type], **overrides)
    config = transformers.AutoConfig.for_model(model_type, **options)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).to(dtype)


def family_pair(model_type, patch_options=None, dtype=torch.float32, **overrides):
    """The same small model twice, in training mode; the second patched."""
    reference = family_model(model_type, dtype, **overrides)
    patched = copy.deepcopy(reference)
    patch(patched, **(patch_options or {}))
    reference.train()
    patched.train()
    return reference, patched


def family_forward(model, tokens, labels):
    return model(input_ids=tokens, labels=labels).loss


def block_counts(model, model_type):
    prefix = CAUSAL_LM_FACTS[model_type].prefix
    return {suffix: sum(type(m).__name__ == prefix + suffix for m in model.modules()) for suffix in BLOCKS[model_type]}


def test_every_family_here_is_in_the_facts_table():
    assert set(FAMILIES) <= set(CAUSAL_LM_FACTS)
    assert CAUSAL_LM_FACTS["granite"].logits_divisor == "logits_scaling"
    assert all(CAUSAL_LM_FACTS[t].router_aux_loss for t in MOE)


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_family_blocks_run_on_tilegrad_and_unpatch_restores_them(model_type):
    """Every RMSNorm (OLMo2's q / k norms included), MLP, experts and attention module of the family
    becomes tilegrad's subclass (same state_dict keys); the loss's graph runs tilegrad's RMSNorm,
    SwiGLU and rotary nodes with logits None; unpatch restores every module and attribute."""
    model = family_model(model_type)
    expected = block_counts(model, model_type)
    assert all(count > 0 for count in expected.values()), expected
    tokens, labels = next(batches())
    model(input_ids=tokens)  # the first forward installs transformers' output-capturing hooks
    before, keys = snapshot(model), list(model.state_dict())
    summary = patch(model)
    assert summary.skipped == [] and has_fused_loss(model)
    module = f"transformers.models.{model_type}.modeling_{model_type}"
    prefix = CAUSAL_LM_FACTS[model_type].prefix
    for suffix, count in expected.items():
        key = f"{module}.{prefix}{suffix} -> tilegrad.torch.patching.Tilegrad{prefix}{suffix}"
        assert summary.counts().get(key) == count, (key, summary.counts())
    assert list(model.state_dict()) == keys

    out = model(input_ids=tokens, labels=labels)
    assert out.logits is None
    nodes = set(graph_node_names(out.loss))
    one_tensor = model_type == "phi3" or model_type in MOE  # a gate_up projection: SwiGLU on one tensor
    wanted = {"TilegradRmsNormBackward", "TilegradRopeBackward",
              "TilegradSwiGluBackward" if one_tensor else "TilegradSiluMulBackward"}
    assert wanted <= nodes, (wanted - nodes)

    restored = unpatch(model)
    assert len(restored) == len(summary)
    assert snapshot(model) == before and block_counts(model, model_type) == expected


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_family_loss_and_every_gradient_equal_the_unpatched_models(request, model_type, on_kernel, dtype):
    """One training step with labels: the fused path (logits None), the loss (with the mixtures' router
    loss) and every parameter's gradient equal the unpatched model's, fp32 to 1e-5 and bf16 within
    bf16 tolerance, on torch's composites (small problems) and on the kernels."""
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")
    reference, patched = family_pair(model_type, dtype=dtype)
    float32 = copy.deepcopy(reference).float() if dtype == torch.bfloat16 and model_type in MOE else None
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    want = reference(input_ids=tokens, labels=labels)
    assert got.logits is None and want.logits is not None
    if model_type in MOE:
        assert want.aux_loss is not None
        torch.testing.assert_close(got.aux_loss, want.aux_loss, rtol=1e-5 if dtype == torch.float32 else 2 ** -7,
                                   atol=0)
    if float32 is None:
        assert_same_loss_and_gradients(got.loss, want.loss, patched, reference, dtype)
    else:
        assert_bf16_gradients_as_close_to_float32_as_the_unpatched(got.loss, want.loss, patched, reference, float32,
                                                                   family_forward(float32, tokens, labels))


def assert_bf16_gradients_as_close_to_float32_as_the_unpatched(patched_loss, reference_loss, patched, reference,
                                                               float32, float32_loss):
    """bf16 mixtures of experts: the router's gradient is a difference of the chosen experts' outputs
    (the top-k weights sum to one), so a bf16 rounding of an expert's output moves it by far more than
    its own relative size (measured: 6% of the tensor's largest value between two bf16 models). Each
    gradient must be as close to the float32 model's (same weights) as the unpatched bf16 model's is,
    within one more bf16 step of the tensor's largest value; the loss within bf16 tolerance."""
    assert abs(patched_loss.item() - reference_loss.item()) <= PATCHED_LOSS_RTOL[torch.bfloat16] * reference_loss.item()
    for loss in (patched_loss, reference_loss, float32_loss):
        loss.backward()
    reference_grads, float32_grads = dict(reference.named_parameters()), dict(float32.named_parameters())
    for name, p in patched.named_parameters():
        truth = float32_grads[name].grad.double()
        scale = truth.abs().max().item()
        err = (p.grad.double() - truth).abs().max().item()
        reference_err = (reference_grads[name].grad.double() - truth).abs().max().item()
        assert err <= 2 * reference_err + 2 ** -7 * scale, f"{name}: {err} vs unpatched {reference_err} (of {scale})"


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_family_training_follows_the_unpatched_model(model_type):
    """20 AdamW steps, float32: the patched model's losses track the unpatched model's. (A mixture of
    experts' top-k routing is discontinuous: float32 sums in another order can flip a near tie a few
    steps in, measured 1.6e-4 apart at step 15 of Qwen3-MoE on transformers 5.0.)"""
    reference, patched = family_pair(model_type)
    want = train(reference, forward=family_forward)
    got = train(patched, forward=family_forward)
    rtol = 1e-3 if model_type in MOE else 1e-4
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= rtol * max(1.0, abs(b)), f"step {step}: patched {a} vs torch {b}"
    assert want[-1] < want[0]


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", FAMILIES)
def test_family_bfloat16_training_follows_the_unpatched_model(model_type):
    """20 AdamW steps with bf16 weights (attention the model's own: see test_patching's bf16 test): the
    patched model's losses track the unpatched model's. A mixture of experts routes each token to
    its top-k experts, a choice that a bf16 rounding can flip and later steps then amplify (two bf16
    runs drift apart by more than bf16 steps): there the patched run must stay as close to the
    float32 run (same initial weights) as the unpatched bf16 run does."""
    reference, patched = family_pair(model_type, patch_options=dict(attention=False), dtype=torch.bfloat16)
    float32 = copy.deepcopy(reference).float() if model_type in MOE else None
    want = train(reference, forward=family_forward)
    got = train(patched, forward=family_forward)
    assert want[-1] < want[0] and got[-1] < got[0]
    if float32 is None:
        for step, (a, b) in enumerate(zip(got, want)):
            assert abs(a - b) <= BF16_LOSS_RTOL * abs(b), f"step {step}: patched {a} vs torch {b}"
        return
    truth = train(float32, forward=family_forward)
    drift = max(abs(a - b) / abs(b) for a, b in zip(got, truth))
    reference_drift = max(abs(a - b) / abs(b) for a, b in zip(want, truth))
    assert drift <= 2 * reference_drift + BF16_LOSS_RTOL, (drift, reference_drift)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_family_saves_the_same_keys_and_generates_the_same_tokens(model_type, tmp_path):
    """save_pretrained of a patched model writes the unpatched model's keys and architecture; greedy
    generate after patching gives the unpatched model's tokens."""
    reference, patched = family_pair(model_type)
    reference.save_pretrained(tmp_path / "reference")
    patched.save_pretrained(tmp_path / "patched")
    from safetensors import safe_open
    for name in ("config.json",):
        assert json.loads((tmp_path / "patched" / name).read_text())["architectures"] == \
            json.loads((tmp_path / "reference" / name).read_text())["architectures"]
    with safe_open(tmp_path / "reference" / "model.safetensors", "pt") as want, \
            safe_open(tmp_path / "patched" / "model.safetensors", "pt") as got:
        assert sorted(got.keys()) == sorted(want.keys())

    reference.eval()
    patched.eval()
    # transformers 5.0's load_balancing_loss_func fails on a cached decoding step (one token's router
    # logits against the whole attention mask): generate without router logits, as at inference
    reference.config.output_router_logits = patched.config.output_router_logits = False
    prompt = next(batches())[0][:, :5]
    options = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(patched.generate(prompt, **options), reference.generate(prompt, **options))


# ----------------------------------------------------------------------------------------------
# the mixtures of experts: every experts implementation, and the router's auxiliary loss


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("model_type", MOE)
@pytest.mark.parametrize("implementation", ["eager", "batched_mm", "grouped_mm"])
def test_moe_experts_run_swiglu_in_every_experts_implementation(model_type, implementation):
    """transformers runs the experts as a loop (eager) or as batched / grouped GEMMs that gate through
    ``_apply_gate``: each of them runs tilegrad's SwiGLU, with the unpatched model's loss and gradients."""
    try:
        reference, patched = family_pair(model_type, experts_implementation=implementation)
    except (ValueError, ImportError, KeyError) as error:  # an implementation this torch / transformers lacks
        pytest.skip(f"experts_implementation={implementation!r}: {error}")
    assert patched.config._experts_implementation == implementation
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert "TilegradSwiGluBackward" in set(graph_node_names(got.loss))
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


@pytest.mark.parametrize("model_type", MOE)
def test_moe_router_loss_is_added_as_the_unpatched_model_adds_it(model_type):
    """output_router_logits from the call, or from the config when not given: the fused loss adds
    router_aux_loss_coef times the same auxiliary loss (and the attention mask reaches it); without
    router logits there is none. The coefficient is read at each call, as the model's own forward does.
    (Attention stays the model's own: the reference attends eagerly, whose fully masked padding rows
    average all keys where SDPA and tilegrad give them 0.)"""
    reference, patched = family_pair(model_type, patch_options=dict(attention=False), output_router_logits=False)
    tokens, labels = next(batches())
    mask = torch.ones_like(tokens)
    mask[0, :3] = 0
    for kwargs in (dict(), dict(output_router_logits=True), dict(output_router_logits=True, attention_mask=mask)):
        want = reference(input_ids=tokens, labels=labels, **kwargs)
        got = patched(input_ids=tokens, labels=labels, **kwargs)
        assert got.logits is None
        assert (got.aux_loss is None) == (want.aux_loss is None) == (not kwargs), kwargs
        if want.aux_loss is not None:
            torch.testing.assert_close(got.aux_loss, want.aux_loss, rtol=1e-6, atol=0)
            assert len(got.router_logits) == len(want.router_logits) >= 1
        assert abs(got.loss.item() - want.loss.item()) <= 1e-5 * want.loss.item(), kwargs
    reference.config.output_router_logits = patched.config.output_router_logits = True
    reference.router_aux_loss_coef = patched.router_aux_loss_coef = 1.0
    without = family_pair(model_type, output_router_logits=False)[1](input_ids=tokens, labels=labels).loss
    want, got = reference(input_ids=tokens, labels=labels), patched(input_ids=tokens, labels=labels)
    assert abs(got.loss.item() - want.loss.item()) <= 1e-5 * want.loss.item()
    assert abs((got.loss - without).item() - got.aux_loss.item()) <= 1e-5 * got.loss.item()


def test_moe_model_without_its_router_attributes_stays_unfused_and_says_why():
    model = family_model("mixtral")
    del model.num_experts_per_tok
    with pytest.warns(UserWarning, match="num_experts_per_tok.*not fused"):
        summary = patch(model)
    assert len(summary.skipped) == 1 and not has_fused_loss(model)
    model.num_experts_per_tok = 2
    unpatch(model)


# ----------------------------------------------------------------------------------------------
# Granite's logits divisor and Phi-3's partial rotary embedding


@pytest.mark.parametrize("logits_scaling", [1.0, 3.0, 8.0, 0.25])
def test_granite_fused_loss_divides_the_logits_as_its_head_does(logits_scaling):
    """Granite's head divides the logits by logits_scaling before its loss: the fused loss and every
    gradient equal the unpatched model's at divisors above, below and equal to one."""
    reference, patched = family_pair("granite", logits_scaling=logits_scaling)
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert got.logits is None
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


def test_granite_head_bias_is_divided_too():
    """A head with a bias (not transformers' default): ``(W h + b) / s`` is ``W (h / s) + b / s``."""
    reference = family_model("granite")
    reference.lm_head.bias = torch.nn.Parameter(torch.linspace(-2.0, 2.0, VOCAB))
    patched = copy.deepcopy(reference)
    patch(patched)
    reference.train()
    patched.train()
    tokens, labels = next(batches())
    got = patched(input_ids=tokens, labels=labels)
    assert got.logits is None
    assert_same_loss_and_gradients(got.loss, reference(input_ids=tokens, labels=labels).loss, patched, reference,
                                   torch.float32)


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("partial_rotary_factor", [1.0, 0.75, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_apply_rotary_pos_emb_matches_phi3s_partial_rotary(partial_rotary_factor, dtype):
    """tgt.apply_rotary_pos_emb with cos / sin narrower than the head (Phi-3's partial_rotary_factor)
    rotates the leading features and passes the rest, as Phi-3's own function: values and gradients
    against it computed in float64."""
    from transformers.models.phi3 import modeling_phi3
    head_dim = 16
    rotary_dim = int(head_dim * partial_rotary_factor)
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 7, head_dim, generator=g).to(dtype).requires_grad_()
    k = torch.randn(2, 2, 7, head_dim, generator=g).to(dtype).requires_grad_()
    angles = torch.randn(2, 7, rotary_dim // 2, generator=g).repeat(1, 1, 2)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    got = _rope.apply_rotary_pos_emb(q, k, cos, sin)
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    want = modeling_phi3.apply_rotary_pos_emb(q64, k64, cos.double(), sin.double())
    # bf16: inputs and results rounded to 8 bits, values up to about 4 (one step there is 2^-6)
    tolerance = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=2 ** -7, atol=2 ** -6)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, **tolerance)
    weights = [torch.randn(t.shape, generator=g, dtype=torch.float64) for t in (q, k)]
    sum((a.double() * w).sum() for a, w in zip(got, weights)).backward()
    sum((b * w).sum() for b, w in zip(want, weights)).backward()
    torch.testing.assert_close(q.grad.double(), q64.grad, **tolerance)
    torch.testing.assert_close(k.grad.double(), k64.grad, **tolerance)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_family_patched_model_pickles_whole(model_type):
    """torch.save / torch.load of a patched model: the same tilegrad classes and the same loss."""
    model = family_model(model_type)
    patch(model)
    assert_patched_model_pickles_whole(model)
