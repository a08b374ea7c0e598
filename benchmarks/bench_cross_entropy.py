"""Cross entropy: tilegrad vs PyTorch, side by side on the same inputs (N=8192, C=32000 by default).

Gradient: tilegrad.cross_entropy_loss_grad vs torch's nll_loss_backward + _log_softmax_backward_data
(what autograd runs for F.cross_entropy), both writing into reused outputs ("reused output") or
allocating ("fresh output"). Forward: tilegrad.cross_entropy_loss vs torch.log_softmax + nll_loss.
Inputs: random logits, per-class weight, 1/8 of the rows ignored (ignore_index=-100), mean.

    python benchmarks/bench_cross_entropy.py           # full size
    python benchmarks/bench_cross_entropy.py --quick   # small smoke run
    python benchmarks/bench_cross_entropy.py --json results.jsonl   # also as JSON lines
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, parse_args, print_table, rel_error  # noqa: E402

import tilegrad as tg  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def make_inputs(n, c, dtype_name, seed=0):
    rng = np.random.default_rng(seed)
    x32 = rng.standard_normal((n, c), dtype=np.float32) * 2
    target = rng.integers(0, c, n).astype(np.int64)
    target[rng.random(n) < 0.125] = -100
    weight = rng.uniform(0.5, 1.5, c).astype(np.float32)
    np_dtype = np.float32 if dtype_name == "fp32" else ml_dtypes.bfloat16
    return x32.astype(np_dtype), target, weight


def bench(n, c, reps, threads):
    tg.set_num_threads(threads)
    torch.set_num_threads(threads)
    rows_grad, rows_fwd = [], []
    for dname in ("fp32", "bf16"):
        x, target, weight = make_inputs(n, c, dname)
        tdtype = torch.float32 if dname == "fp32" else torch.bfloat16
        xt = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if dname == "bf16" else torch.from_numpy(x)
        tt = torch.from_numpy(target)
        wt = torch.from_numpy(weight).to(tdtype)  # torch wants the weight in the input's dtype

        # ---- forward ----
        lp_out = np.empty_like(x)
        lp_t_out = torch.empty_like(xt)

        def torch_fwd_fresh():
            lp = torch.log_softmax(xt, 1)
            return torch.nn.functional.nll_loss(lp, tt, wt, ignore_index=-100)

        def torch_fwd_reused():
            torch.log_softmax(xt, 1, out=lp_t_out)
            return torch.nn.functional.nll_loss(lp_t_out, tt, wt, ignore_index=-100)

        def tg_fwd_fresh():
            return tg.cross_entropy_loss(x, target, weight)

        def tg_fwd_reused():
            return tg.cross_entropy_loss(x, target, weight, out=lp_out)

        loss, lp, _, _ = tg.cross_entropy_loss(x, target, weight)
        ref_loss = torch_fwd_fresh()
        err = abs(float(loss) - float(ref_loss)) / abs(float(ref_loss))
        params = {"n": n, "c": c, "dtype": dname, "reduction": "mean", "weight": True, "ignored_rows": 0.125}
        rows_fwd.append(compare(f"forward {dname} reused output", {"torch": torch_fwd_reused, "tilegrad": tg_fwd_reused},
                                baseline="torch", reps=reps, extra={"loss rel err": f"{err:.1e}"},
                                params={**params, "pass": "forward", "mode": "reused"}))
        rows_fwd.append(compare(f"forward {dname} fresh output", {"torch": torch_fwd_fresh, "tilegrad": tg_fwd_fresh},
                                baseline="torch", reps=reps, params={**params, "pass": "forward", "mode": "fresh"}))

        # ---- gradient ----
        lpt = torch.from_numpy(lp.view(np.uint16)).view(torch.bfloat16) if dname == "bf16" else torch.from_numpy(lp)
        total_weight = (wt[tt.clamp(min=0)] * (tt != -100)).sum()
        go = torch.tensor(1.0, dtype=tdtype)
        go_np = np.asarray(1.0, dtype=x.dtype)
        gi = torch.empty_like(lpt)
        gx = torch.empty_like(lpt)
        out = np.empty_like(lp)

        def torch_grad_reused():
            torch.ops.aten.nll_loss_backward.grad_input(go, lpt, tt, wt, 1, -100, total_weight, grad_input=gi)
            torch.ops.aten._log_softmax_backward_data.out(gi, lpt, 1, tdtype, out=gx)
            return gx

        def torch_grad_fresh():
            g = torch.ops.aten.nll_loss_backward(go, lpt, tt, wt, 1, -100, total_weight)
            return torch.ops.aten._log_softmax_backward_data(g, lpt, 1, tdtype)

        def tg_grad_reused():
            return tg.cross_entropy_loss_grad(go_np, lp, target, weight, out=out)

        def tg_grad_fresh():
            return tg.cross_entropy_loss_grad(go_np, lp, target, weight)

        ref = torch_grad_reused().float().numpy()
        err = rel_error(tg_grad_reused().astype(np.float32), ref)
        rows_grad.append(compare(f"grad {dname} reused output", {"torch": torch_grad_reused, "tilegrad": tg_grad_reused},
                                 baseline="torch", reps=reps, extra={"rel err vs torch": f"{err:.1e}"},
                                 params={**params, "pass": "grad", "mode": "reused"}))
        rows_grad.append(compare(f"grad {dname} fresh output", {"torch": torch_grad_fresh, "tilegrad": tg_grad_fresh},
                                 baseline="torch", reps=reps, params={**params, "pass": "grad", "mode": "fresh"}))
    title = f"N={n}, C={c}, weight, 1/8 rows ignored, mean, {threads} threads"
    print_table(rows_grad, f"cross_entropy_loss_grad: {title}")
    print()
    print_table(rows_fwd, f"cross_entropy_loss (forward): {title}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--c", type=int, default=32000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=tg.get_num_threads())
    args = parse_args(ap)
    if torch is None:
        sys.exit("PyTorch is needed for the side-by-side comparison")
    if args.quick:
        args.n, args.c, args.reps = 256, 4000, 3
    bench(args.n, args.c, args.reps, args.threads)


if __name__ == "__main__":
    main()
