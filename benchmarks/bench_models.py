#!/usr/bin/env python3
"""Training steps of Hugging Face models of real shapes: ``tgt.patch(model)`` against PyTorch.

    python benchmarks/bench_models.py                          # SmolLM2-135M's shape, fp32, autocast, bf16
    python benchmarks/bench_models.py --model qwen3-0.6b-4l --modes fp32,bf16
    python benchmarks/bench_models.py --model gemma3-270m      # also gpt2-124m
    python benchmarks/bench_models.py --compile                # also PyTorch under torch.compile
    python benchmarks/bench_models.py --lora                   # PEFT LoRA r=16 on every block linear
    python benchmarks/bench_models.py --memory                 # peak RSS growth, each path in its own process
    python benchmarks/bench_models.py --quick                  # tiny configs, 3 steps: a smoke run

The models are built from their published configs (nothing is downloaded) with random weights; every
path starts from the same weights and trains on the same random token batches. A path is a way to run
a training step:

- ``tilegrad``: the model patched with ``tgt.patch``, ``tgt.optim.AdamW(max_grad_norm=1.0)``;
- ``pytorch``: the model as transformers builds it, ``clip_grad_norm_`` + ``torch.optim.AdamW(fused=True)``;
- ``pytorch+compile``: the same model under ``torch.compile`` (with ``--compile``).

and a mode says in which precision: ``fp32``; ``autocast`` (both paths' forward under
``torch.autocast("cpu", torch.bfloat16)``); ``bf16`` (tilegrad's recipe: bf16 parameters with float32
master weights and moments, ``AdamW(master_weights=True)``, no casts; PyTorch's recommended bf16 route,
autocast, is its side).

The paths' steps are interleaved in one process (each round runs one step of every path, so the
machine's noise hits all alike) and the table gives the median and minimum ms per step, the ratio to
PyTorch, the step's GEMM FLOPs and the fraction of the GEMM ceiling measured in the same run, and how
far the paths' losses are apart. ``--memory`` runs each path alone in a fresh process and reports the
growth of its peak RSS over the built model (the training's own memory).
"""

import argparse
import contextlib
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402

# Published configs (the architecture only; vocabulary and shapes as released).
SMOLLM2_135M = dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, rms_norm_eps=1e-5,
                    rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=True)
QWEN3_06B = dict(model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960,
                 tie_word_embeddings=True)
# google/gemma-3-270m: the sizes as its published weights give them (GGUF metadata of the release:
# 18 blocks, 640 wide, feed-forward 2048, 4 query heads / 1 key-value head of 256, sliding window 512,
# RMSNorm eps 1e-6, rope base 1e6), the rest transformers' Gemma3TextConfig defaults, which are that
# model's: query_pre_attn_scalar 256, every 6th layer full attention and the others sliding
# (sliding_window_pattern 6), sliding layers' rope base 10000, gelu_pytorch_tanh, tied embeddings.
GEMMA3_270M = dict(model_type="gemma3_text", hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144,
                   sliding_window=512, sliding_window_pattern=6, query_pre_attn_scalar=256, rms_norm_eps=1e-6,
                   rope_theta=1000000.0, rope_local_base_freq=10000.0, max_position_embeddings=32768,
                   tie_word_embeddings=True)
# openai-community/gpt2 (GPT-2 124M): its config.json, in GPT2Config's names (hidden = n_embd, MLP 4 x n_embd,
# gelu_new, learned positions, head tied to the token embedding). Dropout off (0.1 as released): both
# paths then take the same steps, so their losses compare, as for the other models (which have none).
GPT2_124M = dict(model_type="gpt2", n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257,
                 layer_norm_epsilon=1e-5, activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                 attn_pdrop=0.0)
MODELS = {
    "smollm2-135m": SMOLLM2_135M,
    "qwen3-0.6b": QWEN3_06B,
    "qwen3-0.6b-4l": dict(QWEN3_06B, num_hidden_layers=4),
    "gemma3-270m": GEMMA3_270M,
    "gpt2-124m": GPT2_124M,
    # --quick: the same families, tiny.
    "tiny-llama": dict(SMOLLM2_135M, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, vocab_size=512),
    "tiny-qwen3": dict(QWEN3_06B, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=512),
    "tiny-gemma3": dict(GEMMA3_270M, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                        num_attention_heads=4, num_key_value_heads=1, head_dim=32, vocab_size=512,
                        sliding_window=16, sliding_window_pattern=3, query_pre_attn_scalar=32),
    "tiny-gpt2": dict(GPT2_124M, n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=512, bos_token_id=0,
                      eos_token_id=0),
}
QUICK_MODELS = ["tiny-llama", "tiny-qwen3", "tiny-gemma3", "tiny-gpt2"]
MODES = ("fp32", "autocast", "bf16")
# every linear layer of a block, by family (GPT-2's are Conv1D: one qkv projection, its output and the MLP's two)
LLAMA_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_TARGETS = {"llama": LLAMA_LORA_TARGETS, "qwen3": LLAMA_LORA_TARGETS, "gemma3_text": LLAMA_LORA_TARGETS,
                "gpt2": ["c_attn", "c_proj", "c_fc"]}


def model_config(name: str):
    """The transformers config of ``MODELS[name]`` (no weights)."""
    from transformers import AutoConfig

    spec = dict(MODELS[name])
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    config._attn_implementation = "sdpa"
    return config


def build_model(name: str, seed: int = 0) -> torch.nn.Module:
    """The model of ``MODELS[name]`` with random weights (the same for a given seed)."""
    from transformers import AutoModelForCausalLM

    config = model_config(name)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).train()


def with_lora(model: torch.nn.Module) -> torch.nn.Module:
    """PEFT LoRA (r=16, alpha 32) on every linear layer of the blocks; only the adapters train."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        sys.exit("bench_models: --lora needs PEFT: pip install \".[bench]\" (or pip install peft)")
    targets = LORA_TARGETS[model.config.model_type]
    return get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets))


@dataclass
class Path:
    """One way to run a training step: a model, its optimizer, and what wraps its forward."""
    name: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    clip: bool                    # clip_grad_norm_ before the step (tilegrad's optimizer clips itself)
    autocast: bool

    def step(self, batch: torch.Tensor) -> float:
        forward = torch.autocast("cpu", torch.bfloat16) if self.autocast else contextlib.nullcontext()
        with forward:
            loss = self.model(input_ids=batch, labels=batch).loss
        loss.backward()
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.clip:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def make_path(name: str, base: torch.nn.Module, mode: str, lora: bool, lr: float = 1e-4) -> Path:
    """``name`` (tilegrad, pytorch, pytorch+compile) in ``mode`` on a copy of ``base``."""
    model = copy.deepcopy(base)
    if name == "tilegrad" and mode == "bf16":
        model.to(torch.bfloat16)
    if lora:
        model = with_lora(model)
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "tilegrad":
        tgt.patch(model)
        optimizer = tgt.optim.AdamW(params, lr=lr, max_grad_norm=1.0, master_weights=(mode == "bf16"))
        return Path(name, model, optimizer, clip=False, autocast=(mode == "autocast"))
    optimizer = torch.optim.AdamW(params, lr=lr, fused=True)
    if name == "pytorch+compile":
        model = torch.compile(model)
    return Path(name, model, optimizer, clip=True, autocast=(mode != "fp32"))


def gemm_flops(config, batch: int, seq: int, lora: bool) -> float:
    """Multiply-add FLOPs of one training step's GEMMs (forward 2, backward 4 per multiply-add; causal
    attention counts half of its score and value products, a sliding window only the pairs inside it).
    LoRA: the frozen weights need no weight gradient (4 instead of 6), the adapters are negligible.
    Read from the built model's config (transformers maps GPT-2's n_embd / n_layer / n_head to these names)."""
    h, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or h // heads  # Gemma's 256 is not hidden / heads
    tokens = batch * seq
    attention_weights = h * heads * head_dim * 2 + h * kv_heads * head_dim * 2  # q and o; k and v
    per_weight = 4 if lora else 6
    # (QK^T + PV) x 3 passes x 2 FLOPs per multiply-add, over the (query, key) pairs each layer attends
    attention = sum(12 * batch * heads * pairs * head_dim for pairs in _attended_pairs(config, seq))
    return tokens * (per_weight * layers * (attention_weights + _mlp_weights(config)) + 6 * h * vocab) + attention


def _mlp_weights(config) -> int:
    """Weights of one block's MLP: GPT-2's two matrices of n_inner (4 x hidden), a gated MLP's three."""
    if config.model_type == "gpt2":
        return 2 * config.hidden_size * (config.n_inner or 4 * config.hidden_size)
    return 3 * config.hidden_size * config.intermediate_size


def _attended_pairs(config, seq: int) -> List[float]:
    """Per layer, the (query, key) pairs its causal attention computes: seq^2 / 2, or within a sliding
    window w < seq, seq * w - w^2 / 2 (Gemma 3's sliding layers)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
    return [seq * window - window * window / 2 if kind == "sliding_attention" and window and window < seq
            else seq * seq / 2 for kind in types]


def interleaved(paths: List[Path], batches: List[torch.Tensor], warmup: int,
                ceiling: Optional[Callable[[], float]] = None) -> Dict[str, dict]:
    """Every path trains on the same batches, one step each per round; times of the rounds after
    ``warmup`` and every loss. ``ceiling`` (the GEMM ceiling's probe) runs after each timed round, so
    the steps are compared with the machine's GEMM rate at the time they ran: on a shared host it
    drifts by 10% or more within a run (results["ceiling"]["times"] holds its FLOP/s)."""
    results = {p.name: {"times": [], "losses": []} for p in paths}
    results["ceiling"] = {"times": [], "losses": []}
    for i, batch in enumerate(batches):
        for path in paths:
            t0 = time.perf_counter()
            loss = path.step(batch)
            elapsed = time.perf_counter() - t0
            results[path.name]["losses"].append(loss)
            if i >= warmup:
                results[path.name]["times"].append(elapsed)
        if ceiling is not None and i >= warmup:
            results["ceiling"]["times"].append(ceiling())
        _progress(f"step {i + 1}/{len(batches)}: " + ", ".join(
            f"{p.name} {results[p.name]['losses'][-1]:.4f}" for p in paths))
    return results


def _progress(text: str) -> None:
    print(f"\r  {text}", end="", file=sys.stderr, flush=True)


def random_batches(vocab: int, batch: int, seq: int, count: int, seed: int = 1) -> List[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, seq), generator=g) for _ in range(count)]


def peak_rss_growth_child(args) -> None:
    """--child: one path alone; prints {"rss_growth_mib", "ms_per_step"} as JSON on the last line."""
    base = build_model(args.model)
    path = make_path(args.child, base, args.modes, args.lora)
    del base
    batches = random_batches(MODELS[args.model]["vocab_size"], args.batch, args.seq, args.steps)
    before = _peak_rss_reset()
    times = []
    for batch in batches:
        t0 = time.perf_counter()
        path.step(batch)
        times.append(time.perf_counter() - t0)
    growth = _peak_rss_kib() - before
    print(json.dumps({"rss_growth_mib": growth / 1024, "ms_per_step": 1e3 * statistics.median(times[1:] or times)}))


def _peak_rss_reset() -> int:
    """Resets the process's peak RSS to its current RSS (Linux: clear_refs 5); returns it in KiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _peak_rss_kib()


def _peak_rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def memory_table(args, names: List[str]) -> None:
    """Each path alone in a fresh process: the growth of peak RSS during training over the built model."""
    print(f"\n### peak memory of training, {args.model}, {args.batch} x {args.seq} tokens, "
          f"{args.steps} steps, each path in its own process\n")
    print("| mode | path | peak RSS growth (MiB) | ms per step (median, alone) |\n|---|---|---:|---:|")
    for mode, name in ((m, n) for m in args.modes.split(",") for n in names):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--model", args.model, "--modes",
               mode, "--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps)]
        cmd += ["--lora"] if args.lora else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        result = json.loads(out)
        print(f"| {mode} | {name} | {result['rss_growth_mib']:,.0f} | {result['ms_per_step']:,.0f} |", flush=True)


def speed_table(args, names: List[str]) -> None:
    spec = MODELS[args.model]
    base = build_model(args.model)
    flops = gemm_flops(base.config, args.batch, args.seq, args.lora)
    ceilings = {name: _harness.gemm_ceiling(torch, dtype) for name, dtype in (("fp32", torch.float32),
                                                                              ("bf16", torch.bfloat16))}
    batches = random_batches(spec["vocab_size"], args.batch, args.seq, args.warmup + args.steps)
    print(f"\n# {args.model}{' + LoRA r=16' if args.lora else ''}, {args.batch} x {args.seq} tokens per step, "
          f"{_harness.set_threads(args, torch)} threads, {args.steps} timed steps after {args.warmup}, "
          f"load average {os.getloadavg()[0]:.2f}; step GEMMs {flops / 1e9:,.0f} GFLOP; GEMM ceiling at the start: "
          f"fp32 {ceilings['fp32'] / 1e9:.0f}, bf16 {ceilings['bf16'] / 1e9:.0f} GFLOP/s (the shares below use the "
          f"ceiling probed after every timed round)")
    print("\n| mode | path | ms per step (median) | min | vs PyTorch | GFLOP/s | of ceiling | loss, last | "
          "max loss diff vs PyTorch |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in args.modes.split(","):
        paths = [make_path(name, base, mode, args.lora) for name in names]
        dtype = torch.float32 if mode == "fp32" else torch.bfloat16
        results = interleaved(paths, batches, args.warmup, lambda: _harness.gemm_ceiling(torch, dtype, reps=3))
        print(file=sys.stderr)
        reference = results["pytorch"]
        ceiling = statistics.median(results["ceiling"]["times"])
        print(f"| {mode} | GEMM ceiling during the steps | {ceiling / 1e9:,.0f} GFLOP/s (median of "
              f"{len(results['ceiling']['times'])}, {min(results['ceiling']['times']) / 1e9:,.0f}-"
              f"{max(results['ceiling']['times']) / 1e9:,.0f}) | | | | | | |", flush=True)
        for name in names:
            r = results[name]
            median, best = statistics.median(r["times"]), min(r["times"])
            diff = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], reference["losses"]))
            ratio = statistics.median(reference["times"]) / median
            print(f"| {mode} | {name} | {1e3 * median:,.0f} | {1e3 * best:,.0f} | {ratio:.2f}x | "
                  f"{flops / median / 1e9:.0f} | {flops / median / ceiling:.0%} | {r['losses'][-1]:.4f} | "
                  f"{diff:.2e} |", flush=True)
        _harness.record(f"{args.model} {mode}", {n: statistics.median(results[n]["times"]) for n in names},
                        baseline="pytorch", reps=args.steps,
                        params=dict(model=args.model, mode=mode, batch=args.batch, seq=args.seq, lora=args.lora,
                                    gflop=flops / 1e9))
        del paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="smollm2-135m")
    parser.add_argument("--modes", default="fp32,autocast,bf16", help=f"comma-separated subset of {','.join(MODES)}")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--steps", type=int, default=8, help="timed steps per path")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per path first")
    parser.add_argument("--compile", action="store_true", help="also PyTorch under torch.compile")
    parser.add_argument("--lora", action="store_true", help="PEFT LoRA r=16 on every block linear (pip install peft)")
    parser.add_argument("--memory", action="store_true", help="peak RSS growth of each path in its own process")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    _harness.add_run_options(parser)
    args = _harness.parse_args(parser, benchmark="bench_models")
    bad = [m for m in args.modes.split(",") if m not in MODES]
    if bad:
        parser.error(f"--modes: unknown mode(s) {bad}; choose from {list(MODES)}")
    if args.child:
        return peak_rss_growth_child(args)
    if args.quick:
        args.batch, args.seq, args.steps, args.warmup = 2, 32, 2, 1
    names = ["tilegrad", "pytorch"] + (["pytorch+compile"] if args.compile else [])
    models = QUICK_MODELS if args.quick else [args.model]
    for args.model in models:
        (memory_table if args.memory else speed_table)(args, names)


if __name__ == "__main__":
    main()
