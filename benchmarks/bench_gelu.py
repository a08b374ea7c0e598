"""GELU and GeGLU, forward + backward: tilegrad vs PyTorch eager on the same inputs.

    python benchmarks/bench_gelu.py [--quick] [--reps N] [--json PATH]

Cases: gelu (F.gelu vs tg.gelu) and its gradient (aten.gelu_backward vs tg.gelu_backward), both forms;
GeGLU on a [tokens, 2 * hidden] projection with the tanh form and the left half activated (Gemma's
MLP): torch's chunk + F.gelu + mul (forward) and its autograd backward, vs tg.ge_glu and
tg.ge_glu_backward. Outputs are preallocated for tilegrad; torch allocates as eager code does.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, print_table, start_kernel_benchmark  # noqa: E402

import tilegrad as tg  # noqa: E402
from tilegrad.torch._tensor import as_numpy  # noqa: E402


def gelu_rows(torch, n, dtype, reps):
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator().manual_seed(0)
    tx, tdy = (torch.randn(n, generator=g) * 3).to(tdt), torch.randn(n, generator=g).to(tdt)
    x, dy, out = as_numpy(tx), as_numpy(tdy), as_numpy(torch.empty(n, dtype=tdt))
    rows = []
    for form in ("none", "tanh"):
        size = f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"
        rows.append(compare(f"gelu {form} {dtype} {size} fwd+bwd", {
            "torch": lambda: (torch.nn.functional.gelu(tx, approximate=form),
                              torch.ops.aten.gelu_backward(tdy, tx, approximate=form)),
            "tilegrad": lambda: (tg.gelu(x, form, out=out), tg.gelu_backward(dy, x, form, out=out)),
        }, baseline="torch", reps=reps, params={"numel": n, "dtype": dtype, "approximate": form}))
    return rows


def ge_glu_row(torch, tokens, hidden, dtype, reps):
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator().manual_seed(1)
    tx = torch.randn(tokens, 2 * hidden, generator=g).to(tdt)
    tdy = torch.randn(tokens, hidden, generator=g).to(tdt)
    x, dy = as_numpy(tx), as_numpy(tdy)
    out = as_numpy(torch.empty(tokens, hidden, dtype=tdt))
    gl = as_numpy(torch.empty(tokens, hidden, dtype=tdt))
    dx = as_numpy(torch.empty(tokens, 2 * hidden, dtype=tdt))

    def torch_step():
        xr = tx.detach().requires_grad_()
        gate, up = xr.chunk(2, -1)
        y = torch.nn.functional.gelu(gate, approximate="tanh") * up
        y.backward(tdy)

    def tilegrad_step():
        tg.ge_glu(x, -1, "tanh", True, out=out, out_gelu=gl)
        tg.ge_glu_backward(dy, x, gl, -1, "tanh", True, out=dx)

    return compare(f"ge_glu tanh {dtype} {tokens}x{hidden} fwd+bwd", {"torch": torch_step, "tilegrad": tilegrad_step},
                   baseline="torch", reps=reps, params={"tokens": tokens, "hidden": hidden, "dtype": dtype})


def main():
    args, torch, reps = start_kernel_benchmark(__doc__.splitlines()[0], "small sizes, fewer repetitions",
                                               "gelu / ge_glu")
    n = 1 << 16 if args.quick else 1 << 24
    tokens, hidden = (64, 256) if args.quick else (4096, 2048)
    rows = []
    for dtype in ("fp32", "bf16"):
        rows += gelu_rows(torch, n, dtype, reps)
        rows.append(ge_glu_row(torch, tokens, hidden, dtype, reps))
    print_table(rows)


if __name__ == "__main__":
    main()
