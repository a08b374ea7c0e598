"""aclnnBinaryCrossEntropyWithLogits (the fused forward): tilegrad vs PyTorch, side by side in one run.

Two tables:

1. forward + backward through autograd (what a training step pays): ``torch.autograd.grad`` of
   ``F.binary_cross_entropy_with_logits(x, t, weight, pos_weight=pw)`` in torch eager, the same
   function under ``torch.compile`` (inductor; compiled during the warm-up, not timed), and
   ``tilegrad.torch.binary_cross_entropy_with_logits`` (fused forward + tilegrad's backward).
   Target: >= 2.5x torch eager with weight (N, C) and pos_weight (C,) at 4096x1024.
2. the forward alone: ``tg.binary_cross_entropy_with_logits`` on NumPy arrays ("none" into a reused
   output) vs ``F.binary_cross_entropy_with_logits`` under ``torch.no_grad()`` (torch composes it from
   ~5 passes plain, ~8 with weight and pos_weight, each with a fresh output).

    python benchmarks/bench_binary_cross_entropy_with_logits.py [--quick] [--reps N] [--no-compile]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import add_run_options, compare, parse_args, print_table, rel_error, set_threads  # noqa: E402

import tilegrad as tg  # noqa: E402


def make_inputs(torch, n, c, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g).to(dtype)
    t = (torch.rand(n, c, generator=g) < 0.3).to(dtype)
    w = (torch.rand(n, c, generator=g) + 0.5).to(dtype)
    pw = (torch.rand(c, generator=g) * 3 + 1).to(dtype)
    return x, t, w, pw


def autograd_rows(torch, shapes, dtypes, reps, with_compile):
    import torch.nn.functional as F

    import tilegrad.torch as tgt

    def torch_loss(x, t, w, pw):
        return F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw)

    compiled_loss = torch.compile(torch_loss) if with_compile else None
    rows = []
    for (n, c) in shapes:
        for dtype in dtypes:
            name = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
            x, t, w, pw = make_inputs(torch, n, c, dtype)
            x.requires_grad_()
            for variant in ("weight+pos_weight", "plain"):
                wv, pwv = (w, pw) if variant != "plain" else (None, None)

                def grad_of(loss_fn):
                    return lambda: torch.autograd.grad(loss_fn(x, t, wv, pwv), x)

                contenders = {"torch": grad_of(torch_loss)}
                if compiled_loss is not None:
                    contenders["torch.compile"] = grad_of(compiled_loss)
                contenders["tilegrad"] = grad_of(
                    lambda x, t, w, pw: tgt.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw))
                want = contenders["torch"]()[0].float()
                err = (contenders["tilegrad"]()[0].float() - want).abs().max().item() / want.abs().max().item()
                row = compare(f"{n}x{c} {name} {variant}", contenders, baseline="torch", reps=reps,
                              params={"n": n, "c": c, "dtype": name, "variant": variant, "reduction": "mean",
                                      "mode": "forward+backward autograd"})
                row["extra"] = {"grad rel err vs torch": f"{err:.1e}",
                                "target": ">= 2.5x" if variant != "plain" and (n, c) == (4096, 1024) else ""}
                rows.append(row)
    return rows


def forward_rows(torch, shapes, dtypes, reps):
    import torch.nn.functional as F

    from tilegrad.torch._tensor import as_numpy

    rows = []
    for (n, c) in shapes:
        for dtype in dtypes:
            name = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
            x, t, w, pw = make_inputs(torch, n, c, dtype)
            xn, tn, wn, pwn = (as_numpy(a) for a in (x, t, w, pw))
            out = np.empty(xn.shape, tn.dtype)
            for variant in ("weight+pos_weight", "plain"):
                wa, pwa = (w, pw) if variant != "plain" else (None, None)
                wna, pwna = (wn, pwn) if variant != "plain" else (None, None)
                for reduction in ("mean", "none"):
                    def torch_fwd():
                        with torch.no_grad():
                            return F.binary_cross_entropy_with_logits(x, t, wa, reduction=reduction, pos_weight=pwa)

                    def tg_fwd():
                        if reduction == "none":
                            return tg.binary_cross_entropy_with_logits(xn, tn, wna, pwna, "none", out=out)
                        return tg.binary_cross_entropy_with_logits(xn, tn, wna, pwna, "mean")

                    err = rel_error(np.asarray(tg_fwd()).astype(np.float32), torch_fwd().float().numpy())
                    row = compare(f"{n}x{c} {name} {variant} {reduction}", {"torch": torch_fwd, "tilegrad": tg_fwd},
                                  baseline="torch", reps=reps,
                                  params={"n": n, "c": c, "dtype": name, "variant": variant, "reduction": reduction,
                                          "mode": "forward"})
                    # bytes one pass moves: x, t, [w] read (pw is tiny), [out] written
                    nbytes = xn.nbytes + tn.nbytes + (wn.nbytes if wa is not None else 0)
                    nbytes += out.nbytes if reduction == "none" else 0
                    row["extra"] = {"rel err vs torch": f"{err:.1e}",
                                    "tilegrad GB/s": f"{nbytes / row['times']['tilegrad'] / 1e9:.1f}"}
                    rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(ap)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rows", type=int, nargs="*", help="row counts (default 4096; C = 1024)")
    ap.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile contender")
    ap.add_argument("--only", choices=["autograd", "forward"], help="one table only")
    args = parse_args(ap)

    import torch

    threads = set_threads(args, torch)
    reps = 2 if args.quick else args.reps
    shapes = [(r, 1024) for r in (args.rows or ([256] if args.quick else [4096]))]
    dtypes = [{"float32": torch.float32, "bfloat16": torch.bfloat16}[d] for d in args.dtypes]
    print(f"threads {threads}, tilegrad ISA {tg.active_isa()}, torch {torch.__version__}")
    if args.only != "forward":
        rows = autograd_rows(torch, shapes, dtypes, reps, with_compile=not args.no_compile)
        print()
        print_table(rows, title="BCE with logits forward + backward through autograd (mean; weight (N,C), "
                                "pos_weight (C,))")
    if args.only != "autograd":
        rows = forward_rows(torch, shapes, dtypes, reps)
        print()
        print_table(rows, title="BCE with logits forward alone (weight (N,C), pos_weight (C,))")


if __name__ == "__main__":
    main()
