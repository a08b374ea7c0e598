"""aclnnBinaryCrossEntropyWithLogitsBackward: tilegrad vs a PyTorch user's backward, side by side.

PyTorch: `torch.autograd.grad(F.binary_cross_entropy_with_logits(x, t, weight, pos_weight=pw,
reduction="mean"), x)` on a retained graph (the backward alone; torch composes it from 4 ops plain,
~9 ops with weight and pos_weight, each a separate pass over memory with fresh outputs).
tilegrad: one fused pass; "reused out" writes into a preallocated array, "fresh out" allocates
the result (page faults included, as torch pays them too).

    python benchmarks/bench_binary_cross_entropy_with_logits_backward.py [--quick] [--reps N]
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import add_run_options, compare, parse_args, print_table, rel_error, set_threads  # noqa: E402

import tilegrad as tg  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(ap)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rows", type=int, nargs="*", help="row counts to run (default 4096 32768; C = 1024)")
    ap.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    args = parse_args(ap)

    import torch
    import torch.nn.functional as F

    threads = set_threads(args, torch)
    reps = 2 if args.quick else args.reps
    rows_list = args.rows or ([256] if args.quick else [4096, 32768])
    shapes = [(r, 1024) for r in rows_list]
    print(f"threads {threads}, tilegrad ISA {tg.active_isa()}, torch {torch.__version__}")

    rows = []
    for (n, c) in shapes:
        for dtype_name in args.dtypes:
            np_dtype = np.float32 if dtype_name == "float32" else ml_dtypes.bfloat16
            torch_dtype = torch.float32 if dtype_name == "float32" else torch.bfloat16
            rng = np.random.default_rng(0)
            x = rng.standard_normal((n, c), dtype=np.float32).astype(np_dtype)
            t = (rng.random((n, c), dtype=np.float32) < 0.3).astype(np_dtype)
            w = rng.uniform(0.5, 1.5, size=(n, c)).astype(np.float32).astype(np_dtype)
            pw = rng.uniform(1.0, 4.0, size=(c,)).astype(np.float32).astype(np_dtype)
            dy = np.array(1.0, np_dtype)

            def to_torch(a):
                return torch.from_numpy(a.astype(np.float32)).to(torch_dtype)

            X = to_torch(x).requires_grad_(True)
            T, W, PW, DY = to_torch(t), to_torch(w), to_torch(pw), to_torch(dy)
            for variant in ("plain", "weight+pos_weight"):
                if variant == "plain":
                    loss = F.binary_cross_entropy_with_logits(X, T, reduction="mean")
                    wa, pwa = None, None
                else:
                    loss = F.binary_cross_entropy_with_logits(X, T, W, reduction="mean", pos_weight=PW)
                    wa, pwa = w, pw
                out = np.empty((n, c), np_dtype)

                def torch_bwd():
                    return torch.autograd.grad(loss, X, DY, retain_graph=True)[0]

                def tg_reused():
                    return tg.binary_cross_entropy_with_logits_backward(dy, x, t, wa, pwa, "mean", out=out)

                def tg_fresh():
                    return tg.binary_cross_entropy_with_logits_backward(dy, x, t, wa, pwa, "mean")

                expected = torch_bwd().float().numpy()
                err = rel_error(tg_fresh().astype(np.float32), expected)
                row = compare(f"{n}x{c} {dtype_name} {variant}",
                              {"torch": torch_bwd, "tilegrad reused out": tg_reused, "tilegrad fresh out": tg_fresh},
                              baseline="torch", reps=reps, extra={"rel err vs torch": f"{err:.1e}"},
                              params={"n": n, "c": c, "dtype": dtype_name, "variant": variant, "reduction": "mean"})
                # bytes one pass must move: x, t, [w] read, out written (pw and 0-d dy are tiny)
                nbytes = x.nbytes + t.nbytes + out.nbytes + (w.nbytes if wa is not None else 0)
                gbs = nbytes / row["times"]["tilegrad reused out"] / 1e9
                row["extra"]["tilegrad GB/s"] = f"{gbs:.1f}"
                row["extra"]["tilegrad Gelem/s"] = f"{n * c / row['times']['tilegrad reused out'] / 1e9:.2f}"
                rows.append(row)
                del loss
    print()
    print_table(rows, title="BCE-with-logits backward (mean reduction, scalar grad_output; weight (N,C), "
                            "pos_weight (C,))")


if __name__ == "__main__":
    main()
