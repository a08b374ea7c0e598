"""aclnnEmbeddingDenseBackward vs torch.ops.aten.embedding_dense_backward, same inputs, one run.

    python benchmarks/bench_embedding_dense_backward.py [--quick] [--threads N]

"reused" writes into a preallocated output (torch: the .out overload); "fresh" allocates the
output every call (page faults included). bf16 rows also report the accuracy of both against a
float64 sum (max |err| / max |exact|): tilegrad sums in fp32 and rounds once, torch accumulates in
bf16. "GB/s" counts the bytes the operation must move at least (output written once, gradient
rows and indices read once); the ceiling line is this machine's read+write bandwidth
(out = a + b, float32, all threads, non-temporal stores: tilegrad._core._bandwidth_probe).
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (add_run_options, compare, parse_args, print_table, rel_error, set_threads,  # noqa: E402
                      time_min)

import tilegrad as tg  # noqa: E402
from tilegrad import _core  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def exact_result(grad, idx, v):
    out = np.zeros((v, grad.shape[-1]))
    np.add.at(out, idx.reshape(-1), grad.astype(np.float64).reshape(idx.size, -1))
    return out


def case(torch, label, v, d, n, dtype, pattern="uniform", scale=False, fresh=False, reps=7, accuracy=False):
    rng = np.random.default_rng(0)
    if pattern == "uniform":
        idx = rng.integers(0, v, size=n, dtype=np.int64)
    else:  # a few very frequent tokens, as in real text
        idx = np.minimum(rng.zipf(1.2, size=n) - 1, v - 1).astype(np.int64)
    grad = rng.standard_normal((n, d), dtype=np.float32).astype(dtype)
    tdtype = torch.bfloat16 if dtype == BF16 else {np.dtype(np.float32): torch.float32,
                                                   np.dtype(np.float16): torch.float16}[np.dtype(dtype)]
    tgrad = torch.from_numpy(grad.astype(np.float32)).to(tdtype)
    tidx = torch.from_numpy(idx)
    out = np.empty((v, d), dtype)
    tout = torch.empty((v, d), dtype=tdtype)
    if fresh:
        fns = {
            "torch": lambda: torch.ops.aten.embedding_dense_backward(tgrad, tidx, v, -1, scale),
            "tilegrad": lambda: tg.embedding_dense_backward(grad, idx, v, -1, scale),
        }
    else:
        fns = {
            "torch": lambda: torch.ops.aten.embedding_dense_backward.out(tgrad, tidx, v, -1, scale, out=tout),
            "tilegrad": lambda: tg.embedding_dense_backward(grad, idx, v, -1, scale, out=out),
        }
    extra = {"rel err tilegrad": "", "rel err torch": ""}
    if accuracy and not scale:
        exact = exact_result(grad, idx, v)
        ours = tg.embedding_dense_backward(grad, idx, v)
        theirs = torch.ops.aten.embedding_dense_backward(tgrad, tidx, v, -1, False).float().numpy()
        extra = {"rel err tilegrad": f"{rel_error(ours, exact):.2e}", "rel err torch": f"{rel_error(theirs, exact):.2e}"}
        del exact
    params = {"num_weights": v, "dim": d, "indices": n, "dtype": np.dtype(dtype).name, "pattern": pattern,
              "scale_grad_by_freq": scale, "mode": "fresh" if fresh else "reused"}
    row = compare(label, fns, baseline="torch", reps=reps, extra=extra, params=params)
    moved = v * d * out.itemsize + n * d * grad.itemsize + n * 8
    row["extra"] = {"tilegrad GB/s": f"{moved / row['times']['tilegrad'] / 1e9:.1f}", **row["extra"]}
    return row


def bandwidth_ceiling(n, reps):
    a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    b = np.ones(n, np.float32)
    out = np.empty(n, np.float32)
    t = time_min(lambda: _core._bandwidth_probe(out, a, b, True), reps=reps)
    return 12 * n / t / 1e9


def main():
    ap = argparse.ArgumentParser()
    add_run_options(ap)
    args = parse_args(ap)
    import torch

    threads = set_threads(args, torch)
    print(f"tilegrad {tg.__version__} isa={tg.active_isa()} threads={threads}; torch {torch.__version__} "
          f"threads={torch.get_num_threads()}")
    rows = []
    if args.quick:
        rows.append(case(torch, "V=4000 D=512 L=2048 fp32 reused", 4000, 512, 2048, np.float32, reps=3))
        rows.append(case(torch, "V=4000 D=512 L=2048 bf16 reused", 4000, 512, 2048, BF16, reps=3, accuracy=True))
        rows.append(case(torch, "V=4000 D=64 L=8192 fp32 reused", 4000, 64, 8192, np.float32, reps=3))
    else:
        rows.append(case(torch, "V=32000 D=4096 L=8192 fp32 reused", 32000, 4096, 8192, np.float32, reps=10))
        rows.append(case(torch, "V=32000 D=4096 L=8192 bf16 reused", 32000, 4096, 8192, BF16, reps=10, accuracy=True))
        rows.append(case(torch, "V=32000 D=64 L=65536 fp32 reused", 32000, 64, 65536, np.float32, reps=30))
        rows.append(case(torch, "V=32000 D=64 L=65536 bf16 reused", 32000, 64, 65536, BF16, reps=30, accuracy=True))
        rows.append(case(torch, "V=32000 D=64 L=65536 fp32 zipf scale reused", 32000, 64, 65536, np.float32,
                         pattern="zipf", scale=True, reps=30))
        rows.append(case(torch, "V=32000 D=4096 L=8192 bf16 zipf reused", 32000, 4096, 8192, BF16, pattern="zipf",
                         accuracy=True))
        rows.append(case(torch, "V=32000 D=4096 L=8192 fp32 fresh", 32000, 4096, 8192, np.float32, fresh=True,
                         reps=5))
    print()
    print_table(rows, title="embedding_dense_backward (min of repetitions)")
    n = 1 << (20 if args.quick else 26)
    print(f"ceiling: out=a+b fp32, {12 * n >> 20} MiB moved, NT stores: {bandwidth_ceiling(n, 5):.1f} GB/s")


if __name__ == "__main__":
    main()
