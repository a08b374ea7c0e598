"""Flash attention forward + backward: tilegrad vs PyTorch's F.scaled_dot_product_attention.

    python benchmarks/bench_attention.py [--quick] [--reps N] [--threads N] [--no-compile] [--json PATH]
    python scripts/bench_tables.py from-run PATH attention   # the docs table (docs/benchmarks/attention.md)

Causal attention, BNSD, GQA: B=2, 9/3 heads, S=512, D=64 (SmolLM2-135M) and B=1, 16/8 heads, S=1024,
D=128, in fp32 and bf16. torch runs SDPA (is_causal=True, enable_gqa=True) forward, then backward
through autograd; tilegrad runs flash_attention_score (sparse mode 2 with the 2048 x 2048 template)
then flash_attention_score_grad on zero-copy NumPy views of the same tensors; "tgt" runs
tilegrad.torch.scaled_dot_product_attention forward + backward through autograd (the PyTorch path a
model takes); "torch compiled" is torch's SDPA step under torch.compile (skipped with --no-compile
or where compiling fails: the table says so). GFLOP/s counts the
causal half of the 2 (fwd) + 5 (bwd) GEMMs: 7 * 2 * B * N1 * S^2 * D / 2 (the same work for both;
tilegrad's grad recomputes two of them, not counted); "of ceiling" divides it by the GEMM ceiling
of the dtype measured in the same run (_harness.gemm_ceiling: torch.mm or oneDNN's matmul, the faster). --quick shrinks S to 128 as a smoke test.
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (add_run_options, compare, gemm_ceiling, parse_args, print_table, rel_error,  # noqa: E402
                      set_threads)

import tilegrad as tg  # noqa: E402

# Names of the contenders, torch's eager SDPA first (the baseline).
TORCH, COMPILED, NUMPY, TGT = "torch", "torch compiled", "tilegrad", "tgt"

CASES = [(2, 9, 3, 512, 64), (1, 16, 8, 1024, 128)]  # (B, N1, N2, S, D); the first is SmolLM2-135M's


def as_numpy(torch, t):
    """Zero-copy NumPy view of a CPU tensor (bf16 via an int16 view)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def autograd_step(attend, q, k, v, dy, scale):
    """One forward + backward of ``attend`` (an SDPA-like function) on fresh leaves; returns the output
    and the three gradients."""
    tq, tk, tv = (t.detach().requires_grad_() for t in (q, k, v))
    out = attend(tq, tk, tv, is_causal=True, scale=scale, enable_gqa=True)
    out.backward(dy)
    return out, tq.grad, tk.grad, tv.grad


def compiled_sdpa(torch):
    """torch's SDPA under torch.compile (forward and its compiled backward), or None where compiling
    fails on this machine (no C++ compiler, say): the case is then reported without that column."""
    F = torch.nn.functional
    compiled = torch.compile(F.scaled_dot_product_attention, fullgraph=True)
    probe = torch.randn(1, 2, 8, 8, requires_grad=True)
    try:
        compiled(probe, probe, probe, is_causal=True, scale=0.5, enable_gqa=True).sum().backward()
    except Exception as error:  # noqa: BLE001 - any compile failure means "not measured"
        print(f"# torch.compile unavailable: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
        return None
    return compiled


def run_case(torch, b, n1, n2, s, d, dtype, reps, compiled, ceiling):
    F = torch.nn.functional
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, n1, s, d, generator=g).to(tdt)
    k = torch.randn(b, n2, s, d, generator=g).to(tdt)
    v = torch.randn(b, n2, s, d, generator=g).to(tdt)
    dy = torch.randn(b, n1, s, d, generator=g).to(tdt)
    scale = d ** -0.5
    mask = np.triu(np.ones((2048, 2048), np.uint8), 1)
    nq, nk, nv, ndy = (as_numpy(torch, t) for t in (q, k, v, dy))
    opts = dict(scale_value=scale, atten_mask=mask, sparse_mode=2)

    import tilegrad.torch as tgt

    def torch_step():
        return autograd_step(F.scaled_dot_product_attention, q, k, v, dy, scale)

    def tilegrad_step():
        out, smax, ssum = tg.flash_attention_score(nq, nk, nv, n1, "BNSD", **opts)
        grads = tg.flash_attention_score_grad(nq, nk, nv, ndy, n1, "BNSD", softmax_max=smax, softmax_sum=ssum,
                                              attention_out=out, **opts)
        return (out,) + tuple(grads)

    want = [t.detach().float().numpy() for t in torch_step()]
    got = tilegrad_step()
    errors = ", ".join(f"{name} {rel_error(a.astype(np.float32), w):.1e}"
                       for name, a, w in zip(("out", "dq", "dk", "dv"), got, want))
    contenders = {TORCH: torch_step, NUMPY: tilegrad_step,
                  TGT: lambda: autograd_step(tgt.scaled_dot_product_attention, q, k, v, dy, scale)}
    if compiled is not None:
        contenders[COMPILED] = lambda: autograd_step(compiled, q, k, v, dy, scale)
    row = compare(f"B{b} {n1}/{n2} heads S{s} D{d} {dtype}", contenders, baseline=TORCH, reps=reps,
                  params={"batch": b, "heads": n1, "kv_heads": n2, "seq": s, "head_dim": d, "dtype": dtype})
    flops = 7 * 2 * b * n1 * s * s * d / 2
    row["extra"] = {name + " GFLOP/s": f"{flops / row['times'][name] / 1e9:.1f}" for name in contenders}
    row["extra"][TGT + " of ceiling"] = f"{flops / row['times'][TGT] / ceiling:.0%} of {ceiling / 1e9:.0f}"
    if compiled is None:
        row["times"][COMPILED] = float("nan")  # a column in every row: "not measured"
        row["extra"][COMPILED + " GFLOP/s"] = "n/a"
    row["extra"]["tgt vs torch compiled"] = (f"{row['times'][COMPILED] / row['times'][TGT]:.2f}x"
                                             if compiled is not None else "n/a")
    row["extra"]["max rel. diff vs torch"] = errors
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(parser)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--no-compile", action="store_true", help="skip torch's SDPA under torch.compile")
    args = parse_args(parser, "attention")
    import torch

    threads = set_threads(args, torch)
    reps = 2 if args.quick else args.reps
    cases = [(b, n1, n2, 128 if args.quick else s, d) for b, n1, n2, s, d in CASES]
    print(f"# attention fwd+bwd: tilegrad {tg.__version__} ({tg.active_isa()}) vs torch {torch.__version__}, "
          f"{threads} threads, min of {reps}")
    compiled = None if args.no_compile else compiled_sdpa(torch)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    ceilings = {name: gemm_ceiling(torch, dt, n=512 if args.quick else 2048, reps=reps) for name, dt in dtypes.items()}
    print("# GEMM ceiling (torch.mm or oneDNN matmul, the faster; GFLOP/s): " + ", ".join(f"{n} {c / 1e9:.0f}" for n, c in ceilings.items()))
    rows = [run_case(torch, *case, dtype, reps, compiled, ceilings[dtype]) for case in cases for dtype in dtypes]
    print_table(rows, "flash attention forward + backward (causal)")


if __name__ == "__main__":
    main()
