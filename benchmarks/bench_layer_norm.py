"""LayerNorm through autograd: tilegrad.torch.layer_norm vs PyTorch eager F.layer_norm vs
torch.compile of the same PyTorch code, forward + backward (input, weight and bias gradients), same
inputs, one process, contenders interleaved (_harness.AutogradBenchmark, as bench_decoder.py).

    python benchmarks/bench_layer_norm.py [--quick] [--reps N] [--json PATH] [--no-compile]
                                          [--dtypes fp32,bf16] [--threads N]
    python benchmarks/bench_layer_norm.py --crossover   # small sizes: where the router's composite wins

Case and the issue's targets (tilegrad / eager, tilegrad / compiled): LayerNorm 4096x2048 with weight
and bias (2048) float32 / bfloat16: >= 2x eager, >= 1.2x compiled. Compulsory traffic: x read twice
(forward, backward), y written, dy read, dx written: 5 tensors (mean, rstd, weight, bias negligible).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import AutogradBenchmark, crossover_table  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._layer_norm import TilegradLayerNorm, _layer_norm_composite  # noqa: E402


def torch_layer_norm(x, w, b):
    return F.layer_norm(x, w.shape, w, b, 1e-5)


def crossover_contenders(dtype, n):
    """LayerNorm over 128 features, n elements: (node, composite, torch), each forward + backward."""
    x = torch.randn(n // 128, 128, dtype=dtype, requires_grad=True)
    w = torch.ones(128, dtype=dtype, requires_grad=True)
    b = torch.zeros(128, dtype=dtype, requires_grad=True)
    dy = torch.randn(n // 128, 128, dtype=dtype)
    return [(lambda: TilegradLayerNorm.apply(x, [128], w, b, 1e-5).backward(dy),
             lambda: _layer_norm_composite(x, [128], w, b, 1e-5).backward(dy),
             lambda: torch_layer_norm(x, w, b).backward(dy))]


def main() -> None:
    bench = AutogradBenchmark(__doc__, crossover_help="the small-size table behind the \"layer_norm\" entry of "
                              "tilegrad.torch._eager.CROSSOVER")
    args = bench.start("layer_norm")
    if args.crossover:
        crossover_table(["layer_norm"], [1024, 4096, 16384, 65536, 262144, 1048576], crossover_contenders, args.quick)
        return
    n, d = (4096 // 64 if args.quick else 4096), 2048
    g = torch.Generator().manual_seed(0)

    def cases(dtype, name):
        es = torch.empty((), dtype=dtype).element_size()
        x = torch.randn(n, d, generator=g).to(dtype).requires_grad_()
        w = (1 + 0.1 * torch.randn(d, generator=g)).to(dtype).requires_grad_()
        b = (0.1 * torch.randn(d, generator=g)).to(dtype).requires_grad_()
        return [bench.case(f"layer_norm {name} {n}x{d}", {"op": "layer_norm", "n": n, "d": d, "dtype": name},
                           lambda a, w_, b_: tgt.layer_norm(a, w_.shape, w_, b_, 1e-5), torch_layer_norm, [x, w, b],
                           (torch.randn(n, d, generator=g).to(dtype),), ">= 2x; >= 1.2x compile", 5 * n * d * es)]
    bench.run(cases, title="LayerNorm through autograd")


if __name__ == "__main__":
    main()
