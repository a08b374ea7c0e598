"""LayerNorm through autograd: tilegrad.torch.layer_norm vs PyTorch eager F.layer_norm vs
torch.compile of the same PyTorch code, forward + backward (input, weight and bias gradients), same
inputs, one process, contenders interleaved (bench_decoder.py's harness and bandwidth probe).

    python benchmarks/bench_layer_norm.py [--quick] [--reps N] [--json PATH] [--no-compile]
                                          [--dtypes fp32,bf16] [--threads N]
    python benchmarks/bench_layer_norm.py --crossover   # small sizes: where the router's composite wins

Case and the issue's targets (tilegrad / eager, tilegrad / compiled): LayerNorm 4096x2048 with weight
and bias (2048) float32 / bfloat16: >= 2x eager, >= 1.2x compiled. Compulsory traffic: x read twice
(forward, backward), y written, dy read, dx written: 5 tensors (mean, rstd, weight, bias negligible).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import parse_args, print_table  # noqa: E402
from bench_decoder import NAMES, BandwidthProbe, case, cpu_time_us  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegrad  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._layer_norm import TilegradLayerNorm, _layer_norm_composite  # noqa: E402


def torch_layer_norm(x, w, b):
    return F.layer_norm(x, w.shape, w, b, 1e-5)


def crossover_table(quick: bool = False) -> None:
    """tilegrad's node vs the composite the router takes below the crossover (and vs torch's
    F.layer_norm in the input's dtype), forward + backward, 1 thread, 1K..1M elements. Each cell:
    composite / node (> 1: the node faster; where it passes 1 is the "layer_norm" CROSSOVER entry,
    tilegrad.torch._eager), then torch / node in parentheses."""
    torch.set_num_threads(1)
    print("composite / node (torch / node)\n")
    print("| dtype | elements | layer_norm |\n|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1024, 4096) if quick else (1024, 4096, 16384, 65536, 262144, 1048576):
            x = torch.randn(n // 128, 128, dtype=dtype, requires_grad=True)
            w = torch.ones(128, dtype=dtype, requires_grad=True)
            b = torch.zeros(128, dtype=dtype, requires_grad=True)
            dy = torch.randn(n // 128, 128, dtype=dtype)
            reps = 2 if quick else max(20, 200000 // n)
            node_us = cpu_time_us(lambda: TilegradLayerNorm.apply(x, [128], w, b, 1e-5).backward(dy), reps)
            composite_us = cpu_time_us(lambda: _layer_norm_composite(x, [128], w, b, 1e-5).backward(dy), reps)
            torch_us = cpu_time_us(lambda: torch_layer_norm(x, w, b).backward(dy), reps)
            print(f"| {NAMES[dtype]} | {n} | {composite_us / node_us:.2f}x ({torch_us / node_us:.2f}x) |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile contender")
    parser.add_argument("--crossover", action="store_true", help="the small-size table behind the "
                        "\"layer_norm\" entry of tilegrad.torch._eager.CROSSOVER")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated subset of fp32,bf16")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch and tilegrad threads, the bandwidth probe's too (default: torch's)")
    args = parse_args(parser, benchmark="layer_norm")
    if args.threads:
        torch.set_num_threads(args.threads)
    tilegrad.set_num_threads(torch.get_num_threads())  # the probe calls the core directly
    if args.crossover:
        crossover_table(args.quick)
        return
    n, d = (4096 // 64 if args.quick else 4096), 2048
    g = torch.Generator().manual_seed(0)
    probe = BandwidthProbe()
    rows = []
    for dtype in (t for t in (torch.float32, torch.bfloat16) if NAMES[t] in args.dtypes.split(",")):
        name, es = NAMES[dtype], torch.empty((), dtype=dtype).element_size()
        x = torch.randn(n, d, generator=g).to(dtype).requires_grad_()
        w = (1 + 0.1 * torch.randn(d, generator=g)).to(dtype).requires_grad_()
        b = (0.1 * torch.randn(d, generator=g)).to(dtype).requires_grad_()
        rows.append(case(f"layer_norm {name} {n}x{d}", {"op": "layer_norm", "n": n, "d": d, "dtype": name},
                         lambda a, w_, b_: tgt.layer_norm(a, w_.shape, w_, b_, 1e-5), torch_layer_norm, [x, w, b],
                         (torch.randn(n, d, generator=g).to(dtype),), args.reps, not args.no_compile,
                         ">= 2x; >= 1.2x compile", 5 * n * d * es, probe))
    print_table(rows, title=f"LayerNorm through autograd, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
