"""SiLU backward: tilegrad vs PyTorch (torch.ops.aten.silu_backward), side by side on the same inputs.

    python benchmarks/bench_silu_backward.py [--quick] [--reps N] [--json PATH]

Modes: "reused" writes into a preallocated output (torch: silu_backward.grad_input(..., grad_input=out));
"fresh" allocates the output on every call (page faults included). The ceiling row is this
machine's measured read+write bandwidth: out = a + b on float32 with all threads and non-temporal
stores (tilegrad._core._bandwidth_probe), timed interleaved with the fp32 contenders on the same
buffers; it moves the same 12 bytes per element as fp32 SiLU.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, print_table, start_kernel_benchmark  # noqa: E402

import tilegrad as tg  # noqa: E402
from tilegrad import _core  # noqa: E402
from tilegrad.torch._tensor import as_numpy  # noqa: E402


def make_inputs(torch, n, dtype):
    """Torch tensors and zero-copy NumPy views of the same memory."""
    g = torch.Generator().manual_seed(0)
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    dy = torch.randn(n, generator=g).to(tdt)
    x = (torch.randn(n, generator=g) * 4).to(tdt)
    out = torch.empty(n, dtype=tdt)
    return (dy, x, out), (as_numpy(dy), as_numpy(x), as_numpy(out))


def main():
    args, torch, reps = start_kernel_benchmark(__doc__.splitlines()[0], "1M elements only, fewer repetitions",
                                               "silu_backward")
    sizes = [("1M", 1 << 20)] if args.quick else [("1M", 1 << 20), ("16M", 1 << 24)]
    rows = []
    for size_name, n in sizes:
        for dtype in ["fp32", "bf16", "fp16"]:
            (tdy, tx, tout), (dy, x, out) = make_inputs(torch, n, dtype)
            contenders = {
                "torch": lambda: torch.ops.aten.silu_backward.grad_input(tdy, tx, grad_input=tout),
                "tilegrad": lambda: tg.silu_backward(dy, x, out=out),
            }
            if dtype == "fp32":  # the bandwidth ceiling on the same buffers, interleaved with both
                contenders["ceiling"] = lambda: _core._bandwidth_probe(out, dy, x, True)
            params = {"numel": n, "dtype": dtype}
            reused = compare(f"{dtype} {size_name} reused", contenders, baseline="torch", reps=reps,
                             params={**params, "mode": "reused"})
            fresh = compare(f"{dtype} {size_name} fresh", {
                "torch": lambda: torch.ops.aten.silu_backward(tdy, tx),
                "tilegrad": lambda: tg.silu_backward(dy, x),
            }, baseline="torch", reps=reps, params={**params, "mode": "fresh"})
            es = out.itemsize
            for row in (reused, fresh):
                t = row["times"]["tilegrad"]
                row["extra"] = {"tilegrad GB/s": f"{3 * es * n / t / 1e9:.1f}", "% of ceiling": ""}
            if "ceiling" in reused["times"]:
                ceiling = reused["times"].pop("ceiling")
                fresh["extra"]["% of ceiling"] = ""
                reused["extra"]["% of ceiling"] = (f"{100 * ceiling / reused['times']['tilegrad']:.0f}% "
                                                   f"(ceiling {12 * n / ceiling / 1e9:.1f} GB/s)")
            rows += [reused, fresh]
    print_table(rows, "silu_backward")


if __name__ == "__main__":
    main()
