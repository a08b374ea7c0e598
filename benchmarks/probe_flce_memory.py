"""Extra memory of every fused-loss operator (issue 32 part 3): peak RSS growth of one call, each in a
fresh process, against the operator's workspace, its memory budget and the fp32 logits it avoids.

    python benchmarks/probe_flce_memory.py [--quick] [--shape N H V] [--dtypes bf16,fp32] [--json PATH]

Operators: ``fused_linear_cross_entropy`` (loss + both gradients), ``fused_linear_online_max_sum`` (the
vocabulary-parallel forward), ``fused_linear_cross_entropy_loss_grad`` (its gradient, memory-saving
mode) and ``tilegrad.torch.linear_cross_entropy`` forward + backward (when torch is installed). Per
call: a warm-up on a tiny problem first (library code, oneDNN's kernels and the threads exist from then
on; nothing sized by the real problem is kept), then the peak RSS (VmHWM, reset through
/proc/self/clear_refs) of the real call minus the RSS before it, minus the bytes of the call's own
outputs. "workspace" is what the operator's plan reserves (the two-phase ABI's GetWorkspaceSize);
"beyond workspace" is what the call held on top of it (oneDNN scratchpads, per-row vectors). This is
memory, not timing: the figures do not depend on the machine's load.
"""

import argparse
import os
import subprocess
import sys

import ml_dtypes
import numpy as np

import tilegrad as tg
from tilegrad import _core
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import parse_args, record  # noqa: E402
from bench_fused_linear_cross_entropy import _status_kb, make  # noqa: E402

DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
OPERATORS = ("fused_linear_cross_entropy", "fused_linear_online_max_sum", "fused_linear_cross_entropy_loss_grad",
             "torch.linear_cross_entropy")
MIB = 1 << 20



def call(op, x, w, t):
    """(a zero-argument callable running `op` once on these inputs, the bytes of its outputs)."""
    n, h = x.shape
    v = w.shape[0]
    es = x.dtype.itemsize
    if op == "fused_linear_cross_entropy":
        return (lambda: tg.fused_linear_cross_entropy(x, w, t)), (n * h + v * h) * es
    if op == "fused_linear_online_max_sum":
        return (lambda: tg.fused_linear_online_max_sum(x, w, t, 0, v)), n * 4 * 3 + n * 8 + (n + 7) // 8
    if op == "fused_linear_cross_entropy_loss_grad":
        mx, s, _, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
        g = np.full(n, 1.0 / n, np.float32)
        return (lambda: tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx,
                                                                sum_exp_logits=s)), (n * h + v * h) * es
    import torch
    import tilegrad.torch as tgt
    torch.set_num_threads(tg.get_num_threads())
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if es == 2 else torch.from_numpy(x)
    wt = torch.from_numpy(w.view(np.int16)).view(torch.bfloat16) if es == 2 else torch.from_numpy(w)
    tt = torch.from_numpy(t)

    def run():
        xg, wg = xt.detach().requires_grad_(True), wt.detach().requires_grad_(True)
        tgt.linear_cross_entropy(xg, wg, tt).backward()
        return xg.grad, wg.grad
    # outputs: the two gradients; the op also keeps them between its forward and backward (the
    # forward computes them), which is part of what it holds
    return run, (n * h + v * h) * es


def workspace(op, n, h, v, dtype):
    """The operator's planned workspace bytes at the default budget (0 for the torch path's own)."""
    es = dtype.itemsize
    budget = int(os.environ.get("TILEGRAD_FLCE_BUDGET") or 64 * MIB)  # as flce_budget() reads it
    if op in ("fused_linear_cross_entropy", "torch.linear_cross_entropy"):
        return fused_linear_cross_entropy_plan(n, h, v, dtype)["workspace_bytes"]
    if op == "fused_linear_online_max_sum":
        return _core._flce_forward_tiling(n, h, v, es, budget=budget, threads=tg.get_num_threads())["workspace_bytes"]
    return _core._flce_grad_tiling(n, h, v, es, True, budget=budget, threads=tg.get_num_threads())["workspace_bytes"]



def probe(op, n, h, v, dtype_name):
    """In a fresh process: prints the peak bytes one call held beyond its outputs."""
    dtype = DTYPES[dtype_name]
    warm, _ = call(op, *make(64, h, 256, dtype))
    warm()
    x, w, t = make(n, h, v, dtype)
    fn, out_bytes = call(op, x, w, t)
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM := the current RSS
        f.write("5")
    out = fn()
    peak = _status_kb("VmHWM")
    del out
    print((peak - base) * 1024 - out_bytes)


def measure(op, n, h, v, dtype_name):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--probe", op, str(n), str(h), str(v), dtype_name],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        print(f"probe {op} failed: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return int(r.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small shape (smoke run)")
    parser.add_argument("--shape", nargs=3, type=int, metavar=("N", "H", "V"), default=None)
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--probe", nargs=5, help=argparse.SUPPRESS)
    args = parse_args(parser, benchmark="flce_memory")
    if args.probe:
        op, n, h, v, dt = args.probe
        probe(op, int(n), int(h), int(v), dt)
        return
    n, h, v = args.shape or ((256, 512, 8000) if args.quick else (1024, 2048, 32000))
    print(f"N={n} H={h} V={v}, {tg.get_num_threads()} threads; MiB; logits = N x V fp32\n")
    print("| operator | dtype | extra (peak RSS growth - outputs) | workspace | beyond workspace | logits | "
          "extra / logits |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dt in args.dtypes.split(","):
        for op in args.operators.split(","):
            extra = measure(op, n, h, v, dt)
            if extra is None:
                continue
            ws = workspace(op, n, h, v, DTYPES[dt])
            logits = n * v * 4
            print(f"| {op} | {dt} | {extra / MIB:.1f} | {ws / MIB:.1f} | {(extra - ws) / MIB:.1f} | "
                  f"{logits / MIB:.1f} | {extra / logits:.2f} |", flush=True)
            record(f"{op} {dt} N={n} H={h} V={v}", {"extra_bytes": float(extra)}, "extra_bytes",
                   params={"operator": op, "dtype": dt, "tokens": n, "hidden": h, "vocab": v},
                   extra={"workspace_bytes": ws, "logits_bytes": logits}, clock="bytes")


if __name__ == "__main__":
    main()
