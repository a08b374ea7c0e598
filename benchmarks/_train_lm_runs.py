"""The training runs of benchmarks/bench_train_lm.py: examples/train_lm.py's model, data, schedule and
step on one path, with what the example leaves out: the time of every step, the peak memory, and the
LM head's filtering statistics.

    python benchmarks/_train_lm_runs.py PATH [train_lm.py flags]   # PATH: tilegrad, filtered or pytorch

Paths: ``tilegrad`` (the example as it is), ``filtered`` (its ``--filter TAU``) and ``pytorch``: the same
model on PyTorch's own ops (``TorchOps``) and ``clip_grad_norm_`` + ``torch.optim.AdamW(fused=True)``.
A run writes ``--out``/log.jsonl (with each step's ms) and summary.json; it saves no checkpoint.
"""

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Optional

import torch
import torch.nn.functional as F

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import train_lm  # noqa: E402

PATHS = ("tilegrad", "filtered", "pytorch")
MAX_GRAD_NORM = 1.0  # tilegrad's AdamW in the example clips to this norm inside its step


class ClippedAdamW(torch.optim.AdamW):
    """clip_grad_norm_(params, max_grad_norm), then torch's fused AdamW step (PyTorch's fastest CPU
    AdamW; bf16 parameters keep bf16 moments and no masters): what tgt.optim.AdamW(max_grad_norm=...)
    does in its one pass."""

    def __init__(self, params, max_grad_norm=MAX_GRAD_NORM, master_weights=False, **options):
        super().__init__(params, fused=True, **options)
        self.max_grad_norm = max_grad_norm

    def step(self, closure=None):
        torch.nn.utils.clip_grad_norm_([p for g in self.param_groups for p in g["params"]], self.max_grad_norm)
        return super().step(closure)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TorchOps:
    """PyTorch's own ops for the example's model, under tilegrad.torch's names: the baseline (the
    example's ``tgt`` in a copy of it, ON_TORCH)."""
    optim = SimpleNamespace(AdamW=ClippedAdamW)

    @staticmethod
    def embedding(ids, weight):
        return F.embedding(ids, weight)

    @staticmethod
    def rms_norm(x, normalized_shape, weight, eps):
        return F.rms_norm(x, normalized_shape, weight, eps)

    @staticmethod
    def silu_mul(gate, up):
        return F.silu(gate) * up

    @staticmethod
    def apply_rotary_pos_emb(q, k, cos, sin):
        """Hugging Face's apply_rotary_pos_emb (rotate-half), as Llama computes it."""
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    @staticmethod
    def linear_cross_entropy(hidden, weight, target, filter_tolerance=None, loss_dtype=None):
        """The whole (tokens, vocab) logits, upcast to float32 as Hugging Face's loss does."""
        return F.cross_entropy(F.linear(hidden, weight).float(), target)


def example_on_torch():
    """A second copy of examples/train_lm.py whose ``tgt`` is TorchOps: its model calls PyTorch's own
    functions and its optimizer is ClippedAdamW, while the example itself (``train_lm``) keeps tilegrad's,
    so both paths live in one process (the interleaved timing)."""
    spec = importlib.util.spec_from_file_location("train_lm_on_torch", EXAMPLES / "train_lm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.tgt = TorchOps
    return module


ON_TORCH = example_on_torch()


def build_model(args, vocab: int, path: str):
    """(model, optimizer) of one path, from args.seed: the same initial weights on every path; the
    filtered path is the example with its --filter, the others are exact."""
    if path not in PATHS:
        raise ValueError(f"bench_train_lm: path must be one of {', '.join(PATHS)}, got {path!r}")
    exact = argparse.Namespace(**{**vars(args), "filter": args.filter if path == "filtered" else None})
    return (ON_TORCH if path == "pytorch" else train_lm).build(exact, vocab)


def build(args, data, path: str):
    """build_model() for the tokenizer of `data`."""
    return build_model(args, data.tokenizer.get_vocab_size(), path)


def timed_step(model, opt, batch, lr: float, dtype: str):
    """train_lm.train_step and its milliseconds: (loss, ms)."""
    start = time.perf_counter()
    loss = train_lm.train_step(model, opt, batch, lr, dtype)
    return loss, (time.perf_counter() - start) * 1e3


def filter_stats(model) -> Dict[str, float]:
    """The filtered path's last fused LM-head call (the step's): shares of the logits-gradient blocks the
    grad_input / grad_weight products skipped, and the largest dropped fraction of a row's bound."""
    if not model.filter:
        return {}
    import tilegrad
    s = tilegrad.fused_linear_cross_entropy_filter_stats(detail=True)
    return {k: s[k] for k in ("input_skipped", "weight_skipped", "max_row_dropped")}


class PeakMemory:
    """Peak resident memory growth of this process since construction (Linux /proc/self/status): the
    kernel's high-water mark is reset first (/proc/self/clear_refs), so it covers the training only."""

    def __init__(self) -> None:
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass  # no reset: the growth then also counts what came before (an over-estimate)
        self.base = self.read("VmRSS")

    def peak_growth_mib(self) -> Optional[float]:
        peak = self.read("VmHWM")
        return None if peak is None or self.base is None else (peak - self.base) / 1024

    @staticmethod
    def read(field: str) -> Optional[int]:
        try:
            lines = Path("/proc/self/status").read_text().splitlines()
        except OSError:
            return None
        return next((int(line.split()[1]) for line in lines if line.startswith(field + ":")), None)  # kB


def run(args, path: str) -> Dict:
    """One path's training into args.out (log.jsonl, summary.json); returns the summary."""
    data = train_lm.prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)
    print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or threads)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / train_lm.LOG).open("w") as log:
            summary = train(args, data, path, lambda record: (log.write(json.dumps(record) + "\n"), log.flush()))
    finally:
        torch.set_num_threads(threads)
    (args.out / train_lm.SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def train(args, data, path: str, write) -> Dict:
    model, opt = build(args, data, path)
    val = train_lm.val_batches(data.val, args.batch_size, args.context, args.eval_batches)
    records = [{"step": 0, "val_loss": train_lm.evaluate(model, val, args.dtype)}]
    write(records[0])
    step_ms = []
    memory = PeakMemory()
    with train_lm.StopFlag() as stop:
        for step in range(1, args.steps + 1):
            if stop.requested:  # a flag, read between steps: a KeyboardInterrupt can be lost in a callback
                raise KeyboardInterrupt
            step_ms.append(measured_step(args, data, model, opt, val, step, path, records, write))
    return summarize(args, path, model, data, step_ms, memory.peak_growth_mib(), records)


def measured_step(args, data, model, opt, val, step: int, path: str, records: list, write) -> float:
    """One timed training step (and the validation due after it) appended to records; returns its ms."""
    lr = train_lm.learning_rate(step - 1, args.steps, args.lr)
    batch = train_lm.train_batch(data.train, step - 1, args.seed, args.batch_size, args.context)
    loss, ms = timed_step(model, opt, batch, lr, args.dtype)
    records.append({"step": step, "train_loss": loss, "lr": lr, "ms": ms, **filter_stats(model)})
    write(records[-1])
    if step % args.eval_interval == 0 or step == args.steps:
        records.append({"step": step, "val_loss": train_lm.evaluate(model, val, args.dtype)})
        write(records[-1])
        print(f"[{path}] step {step}: train loss {loss:.3f}, validation {records[-1]['val_loss']:.3f}", flush=True)
    return ms


def summarize(args, path, model, data, step_ms, peak_mib, records) -> Dict:
    """ms per step: the median over the steps after the first two (warm-up)."""
    ms = statistics.median(step_ms[2:] if len(step_ms) > 4 else step_ms)
    tokens = args.batch_size * args.context
    losses = [r["train_loss"] for r in records if "train_loss" in r][-10:]
    vals = [r["val_loss"] for r in records if "val_loss" in r]
    skipped = [r["input_skipped"] for r in records if "input_skipped" in r]
    return {"path": path, "parameters": sum(p.numel() for p in model.parameters()),
            "vocab": data.tokenizer.get_vocab_size(), "steps": args.steps, "tokens_per_step": tokens,
            "dtype": args.dtype, "param_dtype": args.param_dtype, "threads": torch.get_num_threads(),
            "ms_per_step": ms, "tokens_per_s": tokens / ms * 1e3, "peak_memory_mib": peak_mib,
            "final_train_loss": sum(losses) / len(losses), "first_val_loss": vals[0], "final_val_loss": vals[-1],
            "filter_tolerance": args.filter if path == "filtered" else None,
            "mean_input_skipped": sum(skipped) / len(skipped) if skipped else None}


def main(argv=None) -> Dict:
    """`PATH [train_lm.py flags]`: one run; Ctrl-C stops it with status 130 (bench_train_lm says so)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in PATHS:
        raise SystemExit(f"_train_lm_runs: the first argument must be one of {', '.join(PATHS)}, got {argv[:1]}")
    args, _ = train_lm.parse_args(argv[1:])
    if (argv[0] == "filtered") != (args.filter is not None):
        raise SystemExit(f"_train_lm_runs: --filter TAU goes with the filtered path, and only with it (got {argv[0]})")
    try:
        return run(args, argv[0])
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
