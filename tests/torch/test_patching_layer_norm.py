"""patch() and LayerNorm: every torch.nn.LayerNorm (GPT-2's ln_1 / ln_2 / ln_f, GPT-NeoX's input /
post-attention / final norms) becomes tgt.nn.LayerNorm; in training the loss and every parameter
gradient equal the unpatched model's (fp32, 1e-5 relative); unpatch restores every class;
state_dict keys are unchanged; layer_norm=False leaves the norms alone."""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tilegrad.torch as tgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread", "kernels_at_every_size")  # tests/torch/conftest.py

VOCAB, HIDDEN = 96, 32


def tiny(model_type):
    torch.manual_seed(0)
    if model_type == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=2, n_positions=64,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # the same steps
        return transformers.GPT2LMHeadModel(config)
    config = transformers.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    return transformers.GPTNeoXForCausalLM(config)


def layer_norms(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]


def patched(model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # both families are mapped whole: nothing left unsaid
        return tgt.patch(model, **kwargs)


def loss_and_grads(model, tokens):
    model.train()
    model.zero_grad()
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model_type", ["gpt2", "gpt_neox"])
def test_layer_norms_swapped_with_the_same_loss_and_gradients(model_type):
    reference = tiny(model_type)
    model = copy.deepcopy(reference)
    keys = list(model.state_dict())
    summary = patched(model)
    norms = layer_norms(model)
    assert len(norms) == 5  # two per block, and the final one
    assert all(type(m) is tgt.nn.LayerNorm for m in norms)
    assert summary.counts()["torch.nn.LayerNorm -> tilegrad.torch.nn.LayerNorm"] == 5
    assert list(model.state_dict()) == keys
    tokens = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    loss, grads = loss_and_grads(model, tokens)
    want_loss, want_grads = loss_and_grads(reference, tokens)
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    assert grads.keys() == want_grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(g, want_grads[name], rtol=1e-5, atol=1e-6, msg=name)
    tgt.unpatch(model)
    assert all(type(m) is torch.nn.LayerNorm for m in layer_norms(model))


def test_layer_norm_false_leaves_the_norms_alone():
    model = tiny("gpt2")
    summary = patched(model, layer_norm=False)
    assert all(type(m) is torch.nn.LayerNorm for m in layer_norms(model))
    assert not any("LayerNorm" in r.after for r in summary)
    with pytest.raises(TypeError, match="layer_norm must be True or False"):
        tgt.patch(model, layer_norm=1)
