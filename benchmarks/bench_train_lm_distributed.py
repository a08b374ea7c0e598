"""examples/train_lm.py on one process x 2 threads against 2 processes x 1 thread (torchrun, gloo over
loopback): data parallel and the vocabulary-parallel LM head, same global batch, seed and steps.

    python benchmarks/bench_train_lm_distributed.py [--steps 50] [--rounds 2] [--quick] [-- TRAIN_LM FLAGS]

The three contenders run one after the other in each round, in a rotating order, so a change in the
machine's other load hits them alike; each run's ms per step is the median over its steps after the
first two (from the step timestamps of train_lm's log.jsonl), and the table gives the min and the
median over the rounds.
Also printed: the data-parallel run's final validation loss and the vocab-parallel run's worst train
loss against the single-process run of the same round, and the per-rank memory of the LM head.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPT, DISTRIBUTED_SCRIPT = EXAMPLES / "train_lm.py", EXAMPLES / "train_lm_distributed.py"
# --quick: a model that trains in seconds (train_lm.py's flags)
QUICK_MODEL = ["--context", "64", "--dim", "64", "--layers", "2", "--heads", "2", "--ffn-dim", "176", "--vocab", "512",
               "--eval-interval", "10", "--eval-batches", "2"]
CONTENDERS = ("1 process x 2 threads", "2 processes x 1 thread, --parallel data",
              "2 processes x 1 thread, --parallel vocab")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(contender: str, flags: List[str], out: Path) -> List[str]:
    common = [*flags, "--out", str(out), "--sample-tokens", "0"]
    if contender == CONTENDERS[0]:
        return [sys.executable, str(SCRIPT), *common, "--threads", "2"]
    mode = "vocab" if "vocab" in contender else "data"
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
            "--master-port", str(free_port()), str(DISTRIBUTED_SCRIPT), *common, "--threads", "1", "--parallel", mode]


def run(contender: str, flags: List[str], out: Path) -> Dict:
    subprocess.run(command(contender, flags, out), check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    summary = json.loads((out / "summary.json").read_text())
    steps = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if "train_loss" in line]
    summary["train_losses"] = [r["train_loss"] for r in steps]
    summary["ms_per_step"] = ms_per_step([r["time"] for r in steps])
    return summary


def ms_per_step(times: List[float]) -> float:
    """The median time between two steps' log records, after the first two steps (warm-up)."""
    gaps = [(b - a) * 1e3 for a, b in zip(times, times[1:])]
    return statistics.median(gaps[2:] if len(gaps) > 4 else gaps)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a tiny model (a smoke run)")
    ap.add_argument("flags", nargs="*", help="more train_lm.py flags (after --)")
    args = ap.parse_args()
    flags = ["--steps", str(args.steps), *(QUICK_MODEL if args.quick else []), *args.flags]
    print(f"load average at start: {load()}", flush=True)
    results: Dict[str, List[Dict]] = {c: [] for c in CONTENDERS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = CONTENDERS[r % 3:] + CONTENDERS[:r % 3]
            for contender in order:
                results[contender].append(run(contender, flags, Path(tmp) / f"{r}-{CONTENDERS.index(contender)}"))
                print(f"round {r}: {contender}: {results[contender][-1]['ms_per_step']:.1f} ms/step", flush=True)
    print(f"load average at end: {load()}\n")
    print(report(results))


def report(results: Dict[str, List[Dict]]) -> str:
    single = results[CONTENDERS[0]]
    base = min(s["ms_per_step"] for s in single)
    first = single[0]
    lines = [f"{first['parameters'] / 1e6:.2f}M parameters (one process), vocabulary {first['vocab']}, "
             f"{first['steps']} steps x {first['tokens_per_step']} tokens, {first['dtype']}\n",
             "| | ms / step (min) | ms / step (median) | tokens / s (min ms) | vs 1 process x 2 threads | "
             "final val loss | vs 1 process |", "|---|---:|---:|---:|---:|---:|---|"]
    for contender, runs in results.items():
        ms = [s["ms_per_step"] for s in runs]
        same = [agreement(s, one) for s, one in zip(runs, single)]
        lines.append(f"| {contender} | {min(ms):.0f} | {statistics.median(ms):.0f} | "
                     f"{first['tokens_per_step'] / min(ms) * 1e3:,.0f} | {base / min(ms):.2f}x | "
                     f"{runs[0]['final_val_loss']:.4f} | {max(same):.1e} worst relative difference |")
    memory = results[CONTENDERS[2]][0]["lm_head_memory"]
    lines += ["", f"LM head (tied to the embedding: {memory['tied_to_embedding']}), bytes:", "",
              "| | rows | weight | gradient | AdamW state | total |", "|---|---:|---:|---:|---:|---:|"]
    for name, m in (("one process", memory["one_process"]), ("each of 2 ranks", memory["per_rank"])):
        total = m["weight_bytes"] + m["grad_bytes"] + m["optimizer_state_bytes"]
        lines.append(f"| {name} | {m['rows']:,} | {mib(m['weight_bytes'])} | {mib(m['grad_bytes'])} | "
                     f"{mib(m['optimizer_state_bytes'])} | {mib(total)} |")
    return "\n".join(lines)


def agreement(run: Dict, single: Dict) -> float:
    """Worst relative difference of the train losses and of the final validation loss."""
    pairs = list(zip(run["train_losses"], single["train_losses"])) + [(run["final_val_loss"],
                                                                       single["final_val_loss"])]
    return max(abs(a / b - 1) for a, b in pairs)


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


if __name__ == "__main__":
    main()
