"""SiLU backward: tilegrad vs PyTorch (torch.ops.aten.silu_backward), side by side on the same inputs.

    python benchmarks/bench_silu_backward.py [--quick] [--reps N]

Modes: "reused" writes into a preallocated output (torch: silu_backward.grad_input(..., grad_input=out));
"fresh" allocates the output on every call (page faults included). The ceiling row is this
machine's measured read+write bandwidth: out = a + b on float32 with all threads and non-temporal
stores (tilegrad._core._bandwidth_probe), which moves the same 12 bytes per element as fp32 SiLU.
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, print_table, time_min  # noqa: E402

import tilegrad as tg  # noqa: E402
from tilegrad import _core  # noqa: E402


def make_inputs(torch, n, dtype):
    """Torch tensors and zero-copy NumPy views of the same memory."""
    g = torch.Generator().manual_seed(0)
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    dy = torch.randn(n, generator=g).to(tdt)
    x = (torch.randn(n, generator=g) * 4).to(tdt)
    out = torch.empty(n, dtype=tdt)

    def as_numpy(t):
        if tdt == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    return (dy, x, out), (as_numpy(dy), as_numpy(x), as_numpy(out))


def bandwidth_ceiling(n, reps):
    a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    b = np.ones(n, np.float32)
    out = np.empty(n, np.float32)
    t = time_min(lambda: _core._bandwidth_probe(out, a, b, True), reps=reps)
    return t, 12 * n / t / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M elements only, fewer repetitions")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    import torch

    threads = tg.get_num_threads()
    torch.set_num_threads(threads)
    reps = 3 if args.quick else args.reps
    sizes = [("1M", 1 << 20)] if args.quick else [("1M", 1 << 20), ("16M", 1 << 24)]
    print(f"# silu_backward: tilegrad {tg.__version__} ({tg.active_isa()}) vs torch {torch.__version__}, "
          f"{threads} threads, min of {reps}")
    rows = []
    for size_name, n in sizes:
        for dtype in ["fp32", "bf16", "fp16"]:
            (tdy, tx, tout), (dy, x, out) = make_inputs(torch, n, dtype)
            reused = compare(f"{dtype} {size_name} reused", {
                "torch": lambda: torch.ops.aten.silu_backward.grad_input(tdy, tx, grad_input=tout),
                "tilegrad": lambda: tg.silu_backward(dy, x, out=out),
            }, baseline="torch", reps=reps)
            fresh = compare(f"{dtype} {size_name} fresh", {
                "torch": lambda: torch.ops.aten.silu_backward(tdy, tx),
                "tilegrad": lambda: tg.silu_backward(dy, x),
            }, baseline="torch", reps=reps)
            es = out.itemsize
            for row in (reused, fresh):
                t = row["times"]["tilegrad"]
                row["extra"] = {"tilegrad GB/s": f"{3 * es * n / t / 1e9:.1f}"}
            rows += [reused, fresh]
    print_table(rows, "silu_backward")
    for size_name, n in sizes:
        t, gbs = bandwidth_ceiling(n, reps)
        fp32 = next(r for r in rows if r["case"] == f"fp32 {size_name} reused")
        share = t / fp32["times"]["tilegrad"]
        print(f"ceiling {size_name}: out=a+b fp32 NT stores {t * 1e3:.3f} ms = {gbs:.1f} GB/s; "
              f"tilegrad fp32 reused reaches {100 * share:.0f}% of it")


if __name__ == "__main__":
    main()
