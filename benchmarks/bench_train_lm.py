#!/usr/bin/env python3
"""examples/train_lm.py's model trained by tilegrad and by plain PyTorch from the same seed: loss.png
and a summary table.

    python benchmarks/bench_train_lm.py                      # tilegrad vs PyTorch, train_lm's defaults
    python benchmarks/bench_train_lm.py --filter             # tilegrad filtered (TAU 2^-8) vs exact tilegrad
    python benchmarks/bench_train_lm.py --threads 1 --steps 150 --json results.jsonl
    python benchmarks/bench_train_lm.py --quick              # a small model, 30 steps: a smoke run

Every flag of train_lm.py applies to both runs (but --resume: a benchmark starts afresh). Each run is
benchmarks/_train_lm_runs.py in a fresh process (its peak memory is its own: the example's model,
data, schedule and step, timed), writing OUT/PATH/log.jsonl and summary.json; then both paths' steps
are timed alternately on the same batches in this process (``--timing-rounds``, the machine's other
load hits both alike), and OUT gets summary.json, summary.md (the table, with --filter also the
skipped blocks by step) and loss.png.
With ``--json PATH`` the interleaved timing goes to PATH as the shared harness's JSON line.
"""

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch

import _harness
import _train_lm_runs as runs
from _train_lm_runs import train_lm

RUNNER = Path(runs.__file__).resolve()

PATHS = ("tilegrad", "pytorch")  # the two runs, in this order (the first against the second)
FILTER_PATHS = ("filtered", "tilegrad")  # with --filter: bounded filtering against exact tilegrad
LABELS = {"tilegrad": "tilegrad", "pytorch": "PyTorch", "filtered": "tilegrad, filtered"}
REPORT = ("summary.json", "summary.md", "loss.png")
TIMING_ROUNDS = 10
# --quick: a model that trains in seconds, on one thread (flags typed after --quick win)
QUICK = ["--steps", "30", "--context", "64", "--dim", "64", "--layers", "2", "--heads", "2", "--ffn-dim", "176",
         "--vocab", "512", "--eval-interval", "10", "--eval-batches", "2", "--threads", "1", "--timing-rounds", "3"]
# train_lm.py's flags given to both runs (the path and --out are added per run; --filter to the filtered one)
FORWARDED = ("tie", "steps", "batch_size", "lr", "dtype", "param_dtype", "threads", "seed", "eval_interval",
             "eval_batches", "context", "dim", "layers", "heads", "ffn_dim", "vocab", "text", "corpus", "cache_dir")


def build_parser() -> argparse.ArgumentParser:
    """train_lm.py's flags, --timing-rounds, --quick and the harness's --json."""
    parser = train_lm.build_parser()
    parser.description = __doc__.split("\n\n")[0]
    for action in parser._actions:  # train_lm's flags that do not apply here: not offered in --help
        if action.dest in ("resume", "sample_tokens"):
            action.help = argparse.SUPPRESS
    parser.add_argument("--timing-rounds", type=train_lm.within(1), default=TIMING_ROUNDS,
                        help="rounds of alternating tilegrad / PyTorch steps timed in one process")
    parser.add_argument("--quick", action="store_true", help="a small model for a few seconds (smoke run)")
    _harness.add_json_option(parser)
    parser.set_defaults(out=Path("runs") / "bench_train_lm")
    return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """train_lm's checks, and this script's: a fresh folder (default runs/bench_train_lm), no --resume."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--quick" in argv:
        argv = QUICK + argv  # argparse keeps the last value typed
    if build_parser().parse_args(argv).resume:
        raise train_lm.UsageError("--resume does not apply: a benchmark runs both paths afresh (give a new --out, "
                                  "or --overwrite)", "bench_train_lm")
    return train_lm.parse_args(argv, build_parser())[0]


def compared_paths(args: argparse.Namespace) -> Tuple[str, str]:
    """The two runs, the first measured against the second."""
    return FILTER_PATHS if args.filter else PATHS


def run_files(args: argparse.Namespace) -> List[Path]:
    """Every file this command writes into --out: its report and its two runs'."""
    runs_ = [args.out / path / name for path in compared_paths(args) for name in (train_lm.LOG, train_lm.SUMMARY)]
    return [args.out / name for name in REPORT] + runs_


def guard_out_dir(args: argparse.Namespace) -> None:
    """Never replaces earlier results unasked; --overwrite removes them before anything is written."""
    found = [file for file in run_files(args) if file.exists()]
    if found and not args.overwrite:
        names = ", ".join(str(file.relative_to(args.out)) for file in found)
        raise train_lm.UsageError(f"--out {args.out} already holds results ({names}): --overwrite replaces them, "
                                  "or give a new --out", "bench_train_lm")
    for file in found:
        file.unlink()


def child_command(args: argparse.Namespace, path: str) -> List[str]:
    """_train_lm_runs.py for one path, with the flags given here."""
    cmd = [sys.executable, str(RUNNER), path, "--out", str(args.out / path)]
    for key in FORWARDED:
        value = getattr(args, key)
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd + (["--filter", repr(args.filter)] if path == "filtered" else [])


def run_child(cmd: List[str], path: str) -> None:
    """One run in its own process; a failed one stops the benchmark with its exit status (it has printed
    why). Ctrl-C reaches the run too (the terminal signals the whole process group): wait for it to end."""
    with subprocess.Popen(cmd) as child:
        try:
            status = child.wait()
        except KeyboardInterrupt:
            child.wait()
            print(f"bench_train_lm: stopped by Ctrl-C during the {path} run; nothing reported", file=sys.stderr,
                  flush=True)
            raise SystemExit(130) from None
    if status:
        raise SystemExit(status)


def interleaved_timing(args: argparse.Namespace, data) -> Dict[str, Dict[str, float]]:
    """ms per training step of both paths, measured alternately on the same batches in one process:
    min and median over the rounds after one warm-up round."""
    built = {path: runs.build(args, data, path) for path in compared_paths(args)}
    times: Dict[str, List[float]] = {path: [] for path in built}
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or threads)
    try:
        for step in range(args.timing_rounds + 1):
            batch = train_lm.train_batch(data.train, step, args.seed, args.batch_size, args.context)
            for path in list(built) if step % 2 == 0 else list(built)[::-1]:
                _, ms = runs.timed_step(*built[path], batch, args.lr, args.dtype)
                if step > 0:
                    times[path].append(ms)
    finally:
        torch.set_num_threads(threads)
    return {path: {"min_ms": min(t), "median_ms": statistics.median(t)} for path, t in times.items()}


def report(args: argparse.Namespace, data) -> Dict[str, Dict]:
    """The interleaved timing, loss.png and the table, from the two runs' outputs in args.out."""
    paths = compared_paths(args)
    summaries = {p: json.loads((args.out / p / train_lm.SUMMARY).read_text()) for p in paths}
    print(f"\n=== timing: {args.timing_rounds} rounds of alternating steps ===", flush=True)
    for path, timing in interleaved_timing(args, data).items():
        summaries[path]["interleaved"] = timing
    _harness.record("train step", {p: summaries[p]["interleaved"]["median_ms"] / 1e3 for p in paths}, paths[1],
                    params={"parameters": summaries[paths[0]]["parameters"], "dtype": args.dtype,
                            "tokens_per_step": summaries[paths[0]]["tokens_per_step"]},
                    reps=args.timing_rounds)
    (args.out / "summary.json").write_text(json.dumps(summaries, indent=2) + "\n")
    logs = {p: train_lm.read_log(args.out / p / train_lm.LOG) for p in paths}
    plot(logs, args.out / "loss.png")
    table = summary_table(summaries, paths)
    if args.filter:
        table += "\n\n" + filtering_table(logs["filtered"])
    (args.out / "summary.md").write_text(table + "\n")
    print("\n" + table)
    print(f"\nplot: {args.out / 'loss.png'}   logs: {args.out}/<path>/{train_lm.LOG}")
    return summaries


def ratio(first: Optional[float], second: Optional[float]) -> str:
    """How much less (or more) memory the first path's peak is than the second's."""
    if not first or not second:
        return "n/a"
    return f"{1 - first / second:.0%} less" if first <= second else f"{first / second - 1:.0%} more"


def summary_table(s: Dict[str, Dict], paths: Tuple[str, str] = PATHS) -> str:
    """Markdown table: both paths side by side, and the first relative to the second."""
    t, b = s[paths[0]], s[paths[1]]
    ti, bi = t["interleaved"], b["interleaved"]
    tokens = t["tokens_per_step"]
    mem_t, mem_b = t["peak_memory_mib"], b["peak_memory_mib"]
    mib = lambda m: "n/a" if m is None else f"{m:,.0f} MiB"  # noqa: E731
    apart = lambda key: f"{abs(t[key] / b[key] - 1):.2%} apart"  # noqa: E731
    rows = [
        ("ms per step (interleaved, median)", f"{ti['median_ms']:.1f}", f"{bi['median_ms']:.1f}",
         f"{bi['median_ms'] / ti['median_ms']:.2f}x faster"),
        ("ms per step (interleaved, min)", f"{ti['min_ms']:.1f}", f"{bi['min_ms']:.1f}",
         f"{bi['min_ms'] / ti['min_ms']:.2f}x faster"),
        ("tokens / s (interleaved, median)", f"{tokens / ti['median_ms'] * 1e3:,.0f}",
         f"{tokens / bi['median_ms'] * 1e3:,.0f}", ""),
        ("ms per step (own training run, median)", f"{t['ms_per_step']:.1f}", f"{b['ms_per_step']:.1f}",
         f"{b['ms_per_step'] / t['ms_per_step']:.2f}x faster"),
        ("peak memory (training, RSS growth)", mib(mem_t), mib(mem_b), ratio(mem_t, mem_b)),
        ("final train loss (mean of last 10 steps)", f"{t['final_train_loss']:.3f}",
         f"{b['final_train_loss']:.3f}", apart("final_train_loss")),
        ("validation loss, first -> final", f"{t['first_val_loss']:.3f} -> {t['final_val_loss']:.3f}",
         f"{b['first_val_loss']:.3f} -> {b['final_val_loss']:.3f}", apart("final_val_loss")),
    ]
    head = (f"{t['parameters'] / 1e6:.2f}M parameters, vocabulary {t['vocab']}, {t['steps']} steps x "
            f"{tokens} tokens, {t['dtype']}, {t.get('param_dtype', 'float32')} parameters, "
            f"{t['threads']} threads\n\n")
    first, second = LABELS[paths[0]], LABELS[paths[1]]
    lines = [f"| | {first} | {second} | {first} vs {second} |", "|---|---:|---:|---|"]
    lines += [f"| {name} | {a} | {c} | {r} |" for name, a, c, r in rows]
    return head + "\n".join(lines)


def filtering_table(records: List[Dict], rows: int = 10) -> str:
    """Markdown table of a --filter run by step: the shares of logits-gradient blocks the LM head's
    grad_input / grad_weight products skipped and the largest dropped fraction of a row's bound (means
    and maximum over each stretch of steps), with the training loss."""
    steps = [r for r in records if "input_skipped" in r]
    if not steps:
        return "(no filtered steps logged)"
    size = max(1, math.ceil(len(steps) / rows))
    lines = ["| steps | grad_input blocks skipped | grad_weight blocks skipped | max row dropped | train loss |",
             "|---|---:|---:|---:|---:|"]
    for start in range(0, len(steps), size):
        part = steps[start:start + size]
        mean = lambda key: sum(r[key] for r in part) / len(part)  # noqa: E731
        lines.append(f"| {part[0]['step']}-{part[-1]['step']} | {mean('input_skipped'):.1%} | "
                     f"{mean('weight_skipped'):.1%} | {max(r['max_row_dropped'] for r in part):.1e} | "
                     f"{mean('train_loss'):.3f} |")
    return "\n".join(lines)


def plot(logs: Dict[str, List[Dict]], file: Path) -> None:
    """loss.png: train (thin) and validation (markers) loss per step for both paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"tilegrad": "tab:orange", "pytorch": "tab:blue", "filtered": "tab:green"}
    first, second = list(logs)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for path, records in logs.items():
        train = [(r["step"], r["train_loss"]) for r in records if "train_loss" in r]
        val = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
        ax.plot(*zip(*train), color=colors[path], alpha=0.45, lw=1, label=f"{path} train")
        ax.plot(*zip(*val), color=colors[path], marker="o", ms=4, lw=1.5,
                ls="--" if path == second else "-", label=f"{path} validation")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross entropy (nats / token)")
    ax.set_title(f"Small language model on CPU: {LABELS[first]} vs {LABELS[second]} (same seed)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(file)
    plt.close(fig)


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict]:
    """Both training runs (each in a fresh process), then the interleaved timing, plot and table."""
    args = parse_args(argv)
    guard_out_dir(args)
    _harness.start_json(args.json, "train_lm", **{k: getattr(args, k) for k in FORWARDED + ("filter",)})
    data = train_lm.prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)  # cached for the runs
    print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in compared_paths(args):
        print(f"\n=== {path} ===", flush=True)
        run_child(child_command(args, path), path)
    return report(args, data)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict]:
    """run(argv); a mistake on the command line is printed as one line (exit status 2)."""
    try:
        return run(argv)
    except train_lm.UsageError as error:
        print(error, file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    main()
