"""examples/patch_hf_model.py as a user runs it: the PatchSummary is printed, and its losses are those
of the same Llama trained without tilegrad (torch.optim.AdamW after clip_grad_norm_, the reference)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "patch_hf_model.py"
STEPS, HIDDEN, VOCAB = 4, 64, 300


def reference_losses():
    """The example's model, data and optimizer settings in plain PyTorch and transformers."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    tokens = torch.randint(0, VOCAB, (4, 64))
    model.train()
    losses = []
    for _ in range(STEPS):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_patch_hf_model_prints_the_summary_and_trains_like_pytorch():
    r = subprocess.run([sys.executable, str(EXAMPLE), "--steps", str(STEPS), "--hidden", str(HIDDEN),
                        "--vocab", str(VOCAB)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"tilegrad patched \d+ item\(s\):", r.stdout), r.stdout
    for part in ("model.norm", "mlp", "embed_tokens"):  # RMSNorm, SwiGLU, embedding were replaced
        assert part in r.stdout, (part, r.stdout)
    got = [float(v) for v in re.findall(r"step \d+: loss ([0-9.]+)", r.stdout)]
    want = reference_losses()
    assert len(got) == STEPS
    assert got == pytest.approx(want, rel=2e-3)
    assert got[-1] < got[0]  # it learns the batch
