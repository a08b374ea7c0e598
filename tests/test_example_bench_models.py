"""benchmarks/bench_models.py: Hugging Face models of real shapes trained by tgt.patch and by PyTorch.
Its --quick run (tiny configs) as a user types it, and the pieces its figures rest on: every path
starts from the same weights and follows PyTorch's losses, and the FLOP count is the model's.
No timing is asserted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_models.py"
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_models  # noqa: E402


@pytest.mark.parametrize("model", bench_models.QUICK_MODELS)
@pytest.mark.parametrize("mode", ["fp32", "autocast", "bf16"])
def test_paths_start_from_the_same_weights_and_follow_pytorchs_losses(model, mode):
    base = bench_models.build_model(model)
    paths = [bench_models.make_path(name, base, mode, lora=False) for name in ("tilegrad", "pytorch")]
    batches = bench_models.random_batches(bench_models.MODELS[model]["vocab_size"], 2, 16, 3)
    results = bench_models.interleaved(paths, batches, warmup=1)
    ours, theirs = results["tilegrad"]["losses"], results["pytorch"]["losses"]
    # fp32: the same computation up to summation order; bf16 parameters (tilegrad) against autocast
    # (PyTorch): bf16 rounding of the weights and activations.
    tolerance = 1e-5 if mode == "fp32" else 2e-3
    assert len(ours) == 3 and len(results["tilegrad"]["times"]) == 2
    for a, b in zip(ours, theirs):
        assert abs(a - b) <= tolerance * abs(b), (ours, theirs)
    assert ours[-1] != ours[0]  # the optimizer stepped


def test_the_flop_count_is_the_models():
    # SmolLM2-135M, 2 x 512 tokens: 134.5M weights in GEMMs (30 blocks of 3.54M, the tied 576 x 49152
    # head) x 6 FLOPs per weight and token, plus causal attention's QK^T and PV over 30 layers.
    tokens, layers = 1024, 30
    block = 576 * 576 * 2 + 576 * 192 * 2 + 3 * 576 * 1536
    weights = layers * block + 576 * 49152
    attention = layers * 3 * 2 * (2 * 2 * 9 * 512 * 512 * 64) / 2
    expected = 6 * weights * tokens + attention
    config = bench_models.model_config("smollm2-135m")
    assert bench_models.gemm_flops(config, 2, 512, lora=False) == pytest.approx(expected)
    # LoRA: the frozen weights need no weight gradient.
    lora = 4 * layers * block * tokens + 6 * 576 * 49152 * tokens + attention
    assert bench_models.gemm_flops(config, 2, 512, lora=True) == pytest.approx(lora)


def test_the_flop_count_of_gpt2_124m():
    # 12 blocks of q / k / v / o (4 x 768^2) and a two-matrix MLP of 4 x 768 (8 x 768^2), the tied
    # 768 x 50257 head; 12 heads of 64, causal.
    tokens, layers = 1024, 12
    weights = layers * 12 * 768 * 768 + 768 * 50257
    attention = layers * 3 * 2 * (2 * 2 * 12 * 512 * 512 * 64) / 2
    config = bench_models.model_config("gpt2-124m")
    assert bench_models.gemm_flops(config, 2, 512, lora=False) == pytest.approx(6 * weights * tokens + attention)


def test_the_flop_count_of_gemma3_270m():
    # 18 blocks: 4 query heads and 1 key-value head of 256 (q and o 640 x 1024, k and v 640 x 256), a
    # gated MLP of 2048; the tied 640 x 262144 head. At 2 x 2048 tokens the 15 sliding layers (window
    # 512) attend 2048 * 512 - 512^2 / 2 pairs per row of heads, the 3 full ones 2048^2 / 2.
    tokens, seq = 4096, 2048
    block = 640 * 1024 * 2 + 640 * 256 * 2 + 3 * 640 * 2048
    weights = 18 * block + 640 * 262144
    config = bench_models.model_config("gemma3-270m")
    assert config.layer_types.count("full_attention") == 3 and config.head_dim == 256
    pairs = 15 * (seq * 512 - 512 * 512 / 2) + 3 * seq * seq / 2
    attention = 3 * 2 * 2 * 2 * 4 * pairs * 256
    assert bench_models.gemm_flops(config, 2, seq, lora=False) == pytest.approx(6 * weights * tokens + attention)


def test_quick_run_reports_every_mode_and_writes_its_json(tmp_path):
    results = tmp_path / "results.jsonl"
    out = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(results)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and " tilegrad " in line]
    assert [r.split("|")[1].strip() for r in rows] == ["fp32", "autocast", "bf16"] * len(bench_models.QUICK_MODELS)
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["case"] for line in lines] == [f"{m} {mode}" for m in bench_models.QUICK_MODELS
                                                for mode in ("fp32", "autocast", "bf16")]
    assert all(set(line["times_s"]) == {"tilegrad", "pytorch"} for line in lines)


def test_memory_child_reports_the_growth_of_peak_rss():
    out = subprocess.run([sys.executable, str(BENCH), "--child", "tilegrad", "--model", "tiny-llama", "--modes",
                          "fp32", "--batch", "2", "--seq", "16", "--steps", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["rss_growth_mib"] > 0 and result["ms_per_step"] > 0
