"""tgt.linear vs torch's F.linear, forward + backward through autograd, same inputs, one process,
contenders interleaved (issue 32: float32 linear layers on oneDNN instead of MKL).

    python benchmarks/bench_linear.py [--quick] [--reps N] [--json PATH] [--threads N] [--dtypes fp32,bf16]

Cases: the linear layers of SmolLM2-135M (hidden 576, MLP 1536, 9 query / 3 key-value heads of 64) and
Qwen3-0.6B (hidden 1024, MLP 3072, 16 query / 8 key-value heads of 128) at 1024 and 4096 rows, float32
and bfloat16 (bfloat16 runs torch's own F.linear in both contenders: the table shows it is routed
there), plus LoRA's rank-16 adapters (in -> 16 -> out), where the crossover
(``tilegrad.torch._eager.CROSSOVER["linear"]``, multiply-adds) decides: the column "kernel" is
tilegrad's autograd node forced at every size, which sets that crossover.

Each contender computes the output and the gradients of the input and the weight
(``torch.autograd.grad`` with a fixed upstream gradient), as a training step's linear layer does.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import add_run_options, compare, parse_args, print_table, set_threads  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _linear  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

# (model, layer, in_features, out_features)
LAYERS = [
    ("SmolLM2-135M", "q/o", 576, 576), ("SmolLM2-135M", "k/v", 576, 192),
    ("SmolLM2-135M", "gate/up", 576, 1536), ("SmolLM2-135M", "down", 1536, 576),
    ("Qwen3-0.6B", "q", 1024, 2048), ("Qwen3-0.6B", "k/v", 1024, 1024), ("Qwen3-0.6B", "o", 2048, 1024),
    ("Qwen3-0.6B", "gate/up", 1024, 3072), ("Qwen3-0.6B", "down", 3072, 1024),
]
LORA_RANK = 16
LORA = [("SmolLM2-135M", 576, 576), ("Qwen3-0.6B", 1024, 2048)]


def forward_backward(linear, x, w, dy):
    """The layer's output and autograd's gradients of x and w."""
    def run():
        y = linear(x, w)
        return torch.autograd.grad(y, (x, w), dy)
    return run


def kernel_linear(x, w):
    """tilegrad's autograd node whatever the size (what the crossover is measured against)."""
    return _linear.TilegradLinear.apply(x, w, None)


def case(label, rows, k, n, dtype, reps, with_kernel=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, k, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(dtype).requires_grad_()
    dy = torch.randn(rows, n, generator=g).to(dtype)
    contenders = {"torch": forward_backward(F.linear, x, w, dy), "tilegrad": forward_backward(tgt.linear, x, w, dy)}
    if with_kernel:
        contenders["kernel"] = forward_backward(kernel_linear, x, w, dy)
    flops = 6.0 * rows * k * n  # three GEMMs
    row = compare(label, contenders, baseline="torch", reps=reps,
                  params={"rows": rows, "in": k, "out": n, "dtype": str(dtype).replace("torch.", "")})
    row.setdefault("extra", {}).update({f"{name} GFLOP/s": f"{flops / t / 1e9:.0f}" for name, t in row["times"].items()})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_options(parser)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--dtypes", default="fp32,bf16")
    args = parse_args(parser, benchmark="linear")
    threads = set_threads(args, torch)
    reps = 2 if args.quick else args.reps
    all_rows = (64,) if args.quick else (1024, 4096)
    layers = LAYERS[:2] if args.quick else LAYERS
    layer_rows, lora_rows = [], []
    for dtype_name in args.dtypes.split(","):
        dtype = DTYPES[dtype_name]
        for rows in all_rows:
            for model, layer, k, n in layers:
                layer_rows.append(case(f"{model} {layer} {rows}x{k}->{n} {dtype_name}", rows, k, n, dtype, reps))
    for model, k, n in LORA[:1] if args.quick else LORA:
        for rows in all_rows:
            for part, (k_in, n_out) in (("A", (k, LORA_RANK)), ("B", (LORA_RANK, n))):
                lora_rows.append(case(f"{model} LoRA {part} {rows}x{k_in}->{n_out} fp32", rows, k_in, n_out,
                                      torch.float32, reps, with_kernel=True))
    print_table(layer_rows, title=f"linear forward + backward, {threads} threads")
    print_table(lora_rows, title=f"LoRA adapters (crossover: {_linear.CROSSOVER['linear']} multiply-adds)")

if __name__ == "__main__":
    main()
