"""The LM head at the GEMM ceiling (issue 32 part 3): the fused linear cross entropy (loss, grad_input,
grad_weight) against its own GEMMs run alone through oneDNN, side by side in one process.

    python benchmarks/bench_lm_head.py [--quick] [--reps N] [--clock wall|cpu] [--json PATH] [--table NAME]

Cases: hidden 576 / 1024 / 2048 x vocabulary 49152 / 151936, bfloat16 and float32, N = 1024 tokens, at the
default memory budget (``TILEGRAD_FLCE_BUDGET`` or 64 MiB; --quick: one tiny shape per dtype). Contenders,
interleaved per repetition round, median of the rounds:

- "fused": ``tilegrad.fused_linear_cross_entropy(x, w, t)``, the loss and both gradients;
- "GEMMs": the GEMMs the operator's plan runs, nothing else, through the same thread-count deterministic
  blocked oneDNN GEMM (``core::gemm``, hook ``tilegrad._core._onednn_matmul(blocked=True)``), chunked as
  the plan chunks them (``fused_linear_cross_entropy_plan``): per row chunk (plans "whole" and
  "chunked") logits = x_c W^T (fp32), grad_input_c = G W, grad_weight (+)= G^T x_c (into the fp32
  accumulator for 16-bit weights over several chunks); plan "vocab_outer": the forward's logits blocks,
  then per gradient block the recomputed logits, grad_input (+)= G W_v and grad_weight (+)= G^T x_b;
  the gradient G is a random array of the input dtype, the outputs are allocated per call as the
  operator's are;
- "3 GEMMs plain": the three unchunked products (N x V logits, grad_input, grad_weight) as three calls of
  oneDNN's own multi-threaded matmul: the bound for any implementation that keeps the whole logits.

Columns: "fused / GEMMs" is the throughput the fused loss keeps of its own GEMMs (the target is >= 85%);
"fused / 3 GEMMs" the same against the essential three products (below the first when the plan is
"vocab_outer", whose logits GEMM runs twice). ``--table NAME`` also writes the table (with the
machine, versions and command) to docs/benchmarks/data/NAME.json for the documentation build
(scripts/bench_tables.py); a --quick run never does. Every tilegrad output here is bit-identical for
any thread count; the GEMMs contender's outputs are not used.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import tilegrad as tg
from tilegrad import _core
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import _cpu_model, add_run_options, parse_args, record  # noqa: E402
from bench_fused_linear_cross_entropy import make  # noqa: E402

DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
HIDDEN = (576, 1024, 2048)
VOCAB = (49152, 151936)
TOKENS = 1024
QUICK_SHAPE = (64, 96, 3000)  # tokens, hidden, vocabulary
DATA = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "data"



class PlanGemms:
    """The GEMMs of one plan on preallocated logits / G blocks (the operator's workspace), run through
    core::gemm (``_onednn_matmul(blocked=True)``); ``count`` GEMM calls per run."""

    def __init__(self, plan, x, w, threads):
        self.plan, self.x, self.w, self.threads = plan, x, w, threads
        self.n, self.h = x.shape
        self.v = w.shape[0]
        self.fp32 = x.dtype == np.float32
        self.count = 0
        rng = np.random.default_rng(1)
        rows, cols = self._largest_block()
        self.logits = np.empty((rows, cols), np.float32)
        self.g = (rng.standard_normal((rows, cols)) * 1e-3).astype(np.float32).astype(x.dtype)

    def _largest_block(self):
        p = self.plan
        if p["plan"] != "vocab_outer":
            return p["chunk_rows"], self.v
        return (max(p["bt_chunk"], p["fwd_bt_chunk"]), max(p["v_chunk"], p["fwd_v_chunk"]))

    def gemm(self, a, b, out, accumulate=False):
        _core._onednn_matmul(a, b, out, self.threads, blocked=True, accumulate=accumulate)
        self.count += 1

    def block(self, rows, cols):
        """Dense (rows x cols) views of the logits and G buffers (ld = cols, as the operator's)."""
        return (self.logits.reshape(-1)[:rows * cols].reshape(rows, cols),
                self.g.reshape(-1)[:rows * cols].reshape(rows, cols))

    def __call__(self):
        gin = np.empty((self.n, self.h), self.x.dtype)
        gw = np.empty((self.v, self.h), self.x.dtype)
        if self.plan["plan"] == "vocab_outer":
            self._vocab_outer(gin, gw)
        else:
            self._row_chunks(gin, gw)
        return gin, gw

    def _row_chunks(self, gin, gw):
        x, w, rows = self.x, self.w, self.plan["chunk_rows"]
        chunks = range(0, self.n, rows)
        # grad_weight sums over the chunks in fp32: the output itself (fp32), else an accumulator
        acc = gw if self.fp32 or len(chunks) == 1 else np.empty((self.v, self.h), np.float32)
        for ci, b0 in enumerate(chunks):
            bc = min(rows, self.n - b0)
            logits, g = self.block(bc, self.v)
            self.gemm(x[b0:b0 + bc], w.T, logits)
            self.gemm(g, w, gin[b0:b0 + bc])
            self.gemm(g.T, x[b0:b0 + bc], acc, accumulate=ci > 0)
        if acc is not gw:
            gw[...] = acc  # the one rounding (the operator's cast pass)

    def _vocab_outer(self, gin, gw):
        p, x, w = self.plan, self.x, self.w
        for b0 in range(0, self.n, p["fwd_bt_chunk"]):
            bc = min(p["fwd_bt_chunk"], self.n - b0)
            for v0 in range(0, self.v, p["fwd_v_chunk"]):
                vc = min(p["fwd_v_chunk"], self.v - v0)
                self.gemm(x[b0:b0 + bc], w[v0:v0 + vc].T, self.block(bc, vc)[0])
        bt_chunk, v_chunk = p["bt_chunk"], p["v_chunk"]
        gin_acc = gin if p["grad_input_direct"] else np.empty((self.n if p["v_outer"] else bt_chunk, self.h),
                                                               np.float32)
        gw_acc = gw if p["grad_weight_direct"] else np.empty((v_chunk if p["v_outer"] else self.v, self.h),
                                                            np.float32)
        blocks = [(b0, v0) for v0 in range(0, self.v, v_chunk) for b0 in range(0, self.n, bt_chunk)]
        if not p["v_outer"]:
            blocks.sort()
        for b0, v0 in blocks:
            bc, vc = min(bt_chunk, self.n - b0), min(v_chunk, self.v - v0)
            logits, g = self.block(bc, vc)
            self.gemm(x[b0:b0 + bc], w[v0:v0 + vc].T, logits)
            gi = gin_acc[b0:b0 + bc] if (p["grad_input_direct"] or p["v_outer"]) else gin_acc[:bc]
            self.gemm(g, w[v0:v0 + vc], gi, accumulate=not p["grad_input_direct"] and v0 > 0)
            gwv = gw_acc[v0:v0 + vc] if (p["grad_weight_direct"] or not p["v_outer"]) else gw_acc[:vc]
            self.gemm(g.T, x[b0:b0 + bc], gwv, accumulate=not p["grad_weight_direct"] and b0 > 0)
            # an accumulator's rows complete: the operator rounds them into the output here
            if not p["grad_weight_direct"] and p["v_outer"] and b0 + bc == self.n:
                gw[v0:v0 + vc] = gw_acc[:vc]
            if not p["grad_input_direct"] and not p["v_outer"] and v0 + vc == self.v:
                gin[b0:b0 + bc] = gin_acc[:bc]
        if not p["grad_input_direct"] and p["v_outer"]:
            gin[...] = gin_acc
        if not p["grad_weight_direct"] and not p["v_outer"]:
            gw[...] = gw_acc


def plain_gemms(x, w, threads):
    """The three unchunked products, oneDNN's own multi-threaded call each."""
    n, v = x.shape[0], w.shape[0]
    logits = np.empty((n, v), np.float32)
    g = (np.random.default_rng(2).standard_normal((n, v)) * 1e-3).astype(np.float32).astype(x.dtype)

    def run():
        gin, gw = np.empty_like(x), np.empty_like(w)
        _core._onednn_matmul(x, w.T, logits, threads)
        _core._onednn_matmul(g, w, gin, threads)
        _core._onednn_matmul(g.T, x, gw, threads)
        return gin, gw
    return run


def clock_of(name):
    return time.perf_counter if name == "wall" else time.process_time


def interleaved_median(fns, reps, clock):
    """{name: median seconds}: one warm-up call each, then `reps` rounds running every contender once."""
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t0 = clock()
            f()
            times[k].append(clock() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def case(label, n, h, v, dtype, args, threads):
    x, w, t = make(n, h, v, dtype)
    plan = fused_linear_cross_entropy_plan(n, h, v, dtype)
    gemms = PlanGemms(plan, x, w, threads)
    fns = {"fused": lambda: tg.fused_linear_cross_entropy(x, w, t), "GEMMs": gemms}
    if not args.no_plain:
        fns["3 GEMMs plain"] = plain_gemms(x, w, threads)
    best = interleaved_median(fns, args.reps, clock_of(args.clock))
    calls = gemms.count // (args.reps + 1)
    flops = 6.0 * n * h * v  # logits, grad_input, grad_weight
    own = best["GEMMs"] / best["fused"]
    row = {"case": label, "plan": f"{plan['plan']} ({plan['gemms']} GEMMs, {calls} calls)",
           "fused ms": best["fused"] * 1e3, "GEMMs ms": best["GEMMs"] * 1e3,
           "fused / GEMMs": own, "fused GFLOP/s (3 GEMMs)": flops / best["fused"] / 1e9}
    if "3 GEMMs plain" in best:
        row["3 GEMMs plain ms"] = best["3 GEMMs plain"] * 1e3
        row["fused / 3 GEMMs"] = best["3 GEMMs plain"] / best["fused"]
    print(" | ".join(f"{k}: {val:.3f}" if isinstance(val, float) else f"{k}: {val}" for k, val in row.items()),
          flush=True)
    record(label, best, "fused", clock=args.clock, reps=args.reps,
           params={"tokens": n, "hidden": h, "vocab": v, "dtype": dtype.name, "plan": plan["plan"],
                   "gemms": plan["gemms"], "gemm_calls": calls, "workspace_bytes": plan["workspace_bytes"]},
           extra={"fused / GEMMs": own, **({"fused / 3 GEMMs": row["fused / 3 GEMMs"]} if "fused / 3 GEMMs" in row
                                            else {})})
    return row


def write_table(name, rows, args, threads):
    """docs/benchmarks/data/NAME.json (scripts/bench_tables.py's format)."""
    columns = list(rows[0].keys())
    fmt = lambda c, val: (f"{val:.0%}" if c.startswith("fused / ") else f"{val:.1f}") if isinstance(val, float) \
        else str(val)
    cpu = _cpu_model()
    data = {"title": f"LM head: fused linear cross entropy vs its own GEMMs, N = {TOKENS} tokens, default budget",
            "measured": {"machine": f"{cpu}, {threads} threads, ISA {tg.active_isa()}",
                         "versions": f"tilegrad {tg.__version__}, Python {sys.version.split()[0]}",
                         "load": args.load or "not recorded (pass --load)",
                         "command": "python benchmarks/bench_lm_head.py " + " ".join(sys.argv[1:])},
            "columns": columns, "rows": [[fmt(c, r[c]) for c in columns] for r in rows],
            "notes": f"{args.clock} clock, median of {args.reps} interleaved rounds."}
    (DATA / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_options(parser)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--no-plain", action="store_true", help="skip the unchunked oneDNN ceiling")
    parser.add_argument("--table", metavar="NAME", help="write docs/benchmarks/data/NAME.json (full runs)")
    parser.add_argument("--load", help="the machine's load during the run, for --table")
    args = parse_args(parser, benchmark="lm_head")
    threads = args.threads or tg.get_num_threads()
    tg.set_num_threads(threads)
    if args.quick:
        args.reps = min(args.reps, 2)
    shapes = [QUICK_SHAPE] if args.quick else [(TOKENS, h, v) for h in HIDDEN for v in VOCAB]
    print(f"{threads} threads, tilegrad {tg.__version__}, {tg.active_isa()}, {args.clock} clock, "
          f"median of {args.reps}")
    rows = [case(f"{dt} N={n} H={h} V={v}", n, h, v, DTYPES[dt], args, threads)
            for dt in args.dtypes.split(",") for n, h, v in shapes]
    if args.table and not args.quick:
        write_table(args.table, rows, args, threads)


if __name__ == "__main__":
    main()
