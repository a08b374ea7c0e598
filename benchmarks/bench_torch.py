"""tilegrad.torch vs torch eager: forward + backward through autograd, same inputs, one process.

    python benchmarks/bench_torch.py [--quick] [--reps N] [--json PATH]
    python benchmarks/bench_torch.py --interleaved  # the README's table: tilegrad and torch alternating
    python benchmarks/bench_torch.py --overhead     # per-op overhead at 1K elements (eager, autograd)
    python benchmarks/bench_torch.py --crossover    # small sizes: where the router's composite wins

Each contender computes the loss (or output) and its gradient with ``torch.autograd.grad`` (autograd
allocates the gradient, so there is no reused-output mode); times are the minimum over repetitions,
interleaved between contenders. Cases and the issue's targets (tilegrad / torch speedup):

- cross_entropy N=8192, C=32000, float32 and bfloat16: >= 2.5x
- embedding V=32000, D=4096, 8192 tokens (float32): backward >= 5x (forward+backward also shown)
- binary_cross_entropy_with_logits 4096x1024, weight (N, C) + pos_weight (C,): >= 3x
- silu 16M bfloat16: >= 1.2x
- per-call overhead of torch.ops.tilegrad.silu_backward over tilegrad.silu_backward on NumPy arrays
  (fresh output), 1K float32 elements: <= 15 us
- interleaved torch and tilegrad calls vs the sum of each alone: no slowdown beyond a few percent
- what cross_entropy saves for backward (torch.autograd.graph.saved_tensors_hooks): only log_prob

Large outputs: autograd's (and tilegrad.torch's) outputs are fresh torch allocations. On a machine whose
transparent huge pages are in "madvise" mode, torch's CPU allocator leaves them on 4 KB pages (NumPy
madvises its large arrays) unless ``THP_MEM_ALLOC_ENABLE=1`` is set before torch starts; the first
touch of a 1 GB output then costs more than the kernel. Run once plain and once with
``THP_MEM_ALLOC_ENABLE=1`` (the header says which) to see both.
"""

import argparse
import gc
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, parse_args, print_table, record  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegrad as tg  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._bce import TilegradBceWithLogits, _bce_composite  # noqa: E402
from tilegrad.torch._cross_entropy import TilegradCrossEntropy, _cross_entropy_composite  # noqa: E402
from tilegrad.torch._embedding import TilegradEmbedding  # noqa: E402
from tilegrad.torch._silu import TilegradSilu  # noqa: E402
from tilegrad.torch._tensor import as_numpy  # noqa: E402

NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def grad_of(fn, *leaves):
    """A contender: fn() builds the loss, autograd computes the gradients of ``leaves``."""
    def run():
        return torch.autograd.grad(fn(), leaves)
    return run


def cross_entropy_case(rows, classes, dtype, reps):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(rows, classes, generator=g) * 2).to(dtype).requires_grad_()
    t = torch.randint(0, classes, (rows,), generator=g)
    name = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
    row = compare(f"cross_entropy {name} N={rows} C={classes}", {
        "torch": grad_of(lambda: F.cross_entropy(x, t), x),
        "tilegrad": grad_of(lambda: tgt.cross_entropy(x, t), x),
    }, baseline="torch", reps=reps, params={"op": "cross_entropy", "n": rows, "c": classes, "dtype": name})
    row["extra"] = {"target": ">= 2.5x"}
    return row


def kernel_floor_rows(rows, classes, vocab, dim, tokens, reps):
    """The same work on tilegrad's NumPy entry points into preallocated outputs (no autograd, no fresh
    allocation): how much of the autograd time is the kernels and how much is allocation/first touch."""
    g = torch.Generator().manual_seed(0)
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(rows, classes, generator=g) * 2).to(dtype)
        t = torch.randint(0, classes, (rows,), generator=g)
        log_prob, grad = torch.empty_like(x), torch.empty_like(x)
        xn, tn, lpn, gn = as_numpy(x), as_numpy(t), as_numpy(log_prob), as_numpy(grad)
        one = np.ones((), dtype=xn.dtype)

        def ce_kernels():
            tg.cross_entropy_loss(xn, tn, out=lpn)
            tg.cross_entropy_loss_grad(one, lpn, tn, out=gn)

        name = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
        out.append(compare(f"cross_entropy {name} N={rows} C={classes} fwd+bwd", {
            "torch autograd": grad_of(lambda: F.cross_entropy(x.requires_grad_(), t), x),
            "tilegrad kernels reused": ce_kernels,
        }, baseline="torch autograd", reps=reps,
            params={"op": "cross_entropy", "n": rows, "c": classes, "dtype": name, "mode": "kernel floor"}))
        del x, log_prob, grad, xn, lpn, gn
        gc.collect()
    w = torch.randn(vocab, dim, generator=g).requires_grad_()
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    up = torch.randn(tokens, dim, generator=g)
    grad_w = torch.empty(vocab, dim)
    upn, idn, gwn = as_numpy(up), as_numpy(ids), as_numpy(grad_w)
    emb = F.embedding(ids, w)
    out.append(compare(f"embedding backward V={vocab} D={dim} tokens={tokens}", {
        "torch autograd": lambda: torch.autograd.grad(emb, w, up, retain_graph=True),
        "tilegrad kernels reused": lambda: tg.embedding_dense_backward(upn, idn, vocab, -1, False, out=gwn),
    }, baseline="torch autograd", reps=reps,
        params={"op": "embedding", "num_weights": vocab, "dim": dim, "indices": tokens, "dtype": "fp32",
                "mode": "kernel floor"}))
    return out


def embedding_cases(vocab, dim, tokens, reps):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(vocab, dim, generator=g).requires_grad_()
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    up = torch.randn(tokens, dim, generator=g)
    params = {"op": "embedding", "num_weights": vocab, "dim": dim, "indices": tokens, "dtype": "fp32"}
    both = compare(f"embedding fwd+bwd V={vocab} D={dim} tokens={tokens}", {
        "torch": lambda: torch.autograd.grad(F.embedding(ids, w), w, up),
        "tilegrad": lambda: torch.autograd.grad(tgt.embedding(ids, w), w, up),
    }, baseline="torch", reps=reps, params={**params, "mode": "fwd+bwd"})
    out_torch, out_tilegrad = F.embedding(ids, w), tgt.embedding(ids, w)  # graphs kept for backward-only timing
    backward = compare(f"embedding backward only V={vocab} D={dim} tokens={tokens}", {
        "torch": lambda: torch.autograd.grad(out_torch, w, up, retain_graph=True),
        "tilegrad": lambda: torch.autograd.grad(out_tilegrad, w, up, retain_graph=True),
    }, baseline="torch", reps=reps, params={**params, "mode": "backward only"})
    both["extra"] = {"target": ""}
    backward["extra"] = {"target": ">= 5x"}
    return [both, backward]


def bce_case(rows, cols, reps):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(rows, cols, generator=g).requires_grad_()
    y = torch.rand(rows, cols, generator=g)
    w = torch.rand(rows, cols, generator=g)
    pw = torch.rand(cols, generator=g) * 3
    row = compare(f"bce_with_logits weight+pos_weight {rows}x{cols}", {
        "torch": grad_of(lambda: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), x),
        "tilegrad": grad_of(lambda: tgt.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), x),
    }, baseline="torch", reps=reps,
        params={"op": "binary_cross_entropy_with_logits", "n": rows, "c": cols, "dtype": "fp32",
                "variant": "weight+pos_weight"})
    row["extra"] = {"target": ">= 3x"}
    return row


def silu_case(n, reps):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(n, generator=g) * 4).to(torch.bfloat16).requires_grad_()
    up = torch.randn(n, generator=g).to(torch.bfloat16)
    row = compare(f"silu bf16 {n >> 20}M", {
        "torch": lambda: torch.autograd.grad(F.silu(x), x, up),
        "tilegrad": lambda: torch.autograd.grad(tgt.silu(x), x, up),
    }, baseline="torch", reps=reps, params={"op": "silu", "numel": n, "dtype": "bf16"})
    row["extra"] = {"target": ">= 1.2x"}
    return row


def per_call_overhead(n, reps, calls=200):
    """Microseconds per call: the torch op vs the NumPy entry point, both allocating the output."""
    grad, x = torch.randn(n), torch.randn(n)
    grad_np, x_np = as_numpy(grad), as_numpy(x)

    def loop(fn):
        def run():
            for _ in range(calls):
                fn()
        return run

    row = compare(f"per-call: silu_backward fp32 {n} elements x {calls} calls", {
        "numpy": loop(lambda: tg.silu_backward(grad_np, x_np)),
        "torch.ops": loop(lambda: torch.ops.tilegrad.silu_backward(grad, x)),
    }, baseline="numpy", reps=reps, params={"op": "silu_backward", "numel": n, "dtype": "fp32", "calls": calls})
    t = row["times"]
    overhead_us = (t["torch.ops"] - t["numpy"]) / calls * 1e6
    return {"numpy us/call": t["numpy"] / calls * 1e6, "torch.ops us/call": t["torch.ops"] / calls * 1e6,
            "overhead us": overhead_us}


def interleaving(reps):
    """A tilegrad call (cross entropy fwd+bwd) and a torch call (a float32 GEMM, torch's own threads),
    each alone and alternating: the alternating pair should take about the sum of the two."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(512, 32000, generator=g).requires_grad_()
    t = torch.randint(0, 32000, (512,), generator=g)
    a, b = torch.randn(1024, 1024, generator=g), torch.randn(1024, 1024, generator=g)
    tilegrad_call = grad_of(lambda: tgt.cross_entropy(x, t), x)
    torch_call = lambda: a @ b  # noqa: E731

    def pair():
        tilegrad_call()
        torch_call()

    row = compare("interleaved", {"tilegrad": tilegrad_call, "torch": torch_call, "pair": pair},
                  baseline="pair", reps=reps, params={"tilegrad": "cross_entropy fp32 512x32000 fwd+bwd",
                                                      "torch": "matmul fp32 1024x1024x1024"})
    times = row["times"]
    alone = times["tilegrad"] + times["torch"]
    return {"tilegrad ms": times["tilegrad"] * 1e3, "torch ms": times["torch"] * 1e3, "sum ms": alone * 1e3,
            "interleaved ms": times["pair"] * 1e3, "slowdown %": (times["pair"] / alone - 1) * 100}


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved(label, tilegrad_call, torch_call, reps, params, target):
    """tilegrad's call, then torch's, alternating in one process (never the same call twice in a row, as
    in a training step that mixes tilegrad and torch ops), each timed on its own: min of ``reps``, and the
    minor page faults of each call (fresh memory touched: the cost the output pool removes)."""
    calls = (("tilegrad", tilegrad_call), ("torch", torch_call))
    times = {"torch": float("inf"), "tilegrad": float("inf")}
    faults = {"torch": 0, "tilegrad": 0}
    for _, fn in calls:  # warm-up round, alternating too
        fn()
    gc.disable()
    try:
        for _ in range(reps):
            for name, fn in calls:
                f0, t0 = _minor_faults(), time.perf_counter()
                fn()
                elapsed, faults[name] = time.perf_counter() - t0, _minor_faults() - f0
                times[name] = min(times[name], elapsed)
    finally:
        gc.enable()
    extra = {"tilegrad faults/call": f"{faults['tilegrad']:,}", "torch faults/call": f"{faults['torch']:,}",
             "target": target}
    record(label, times, "torch", params={**params, "mode": "interleaved"}, extra=extra, reps=reps)
    return {"case": label, "times": times, "baseline": "torch", "extra": extra}


def interleaved_rows(reps, scale):
    """The README's table: forward+backward through autograd, tilegrad and torch alternating."""
    g = torch.Generator().manual_seed(6)
    rows = []
    for dtype, target in ((torch.float32, ">= 3x"), (torch.bfloat16, ">= 2.5x")):
        n, c = 8192 // scale, 32000
        x = (torch.randn(n, c, generator=g) * 2).to(dtype).requires_grad_()
        t = torch.randint(0, c, (n,), generator=g)
        name = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
        rows.append(interleaved(f"cross_entropy {name} N={n} C={c}", grad_of(lambda: tgt.cross_entropy(x, t), x),
                                grad_of(lambda: F.cross_entropy(x, t), x), reps,
                                {"op": "cross_entropy", "n": n, "c": c, "dtype": name}, target))
        del x, t
        gc.collect()
    vocab, dim, tokens = 32000 // scale, 4096 // scale, 8192
    w = torch.randn(vocab, dim, generator=g).requires_grad_()
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    up = torch.randn(tokens, dim, generator=g)
    rows.append(interleaved(f"embedding fwd+bwd V={vocab} D={dim} tokens={tokens}",
                            lambda: torch.autograd.grad(tgt.embedding(ids, w), w, up),
                            lambda: torch.autograd.grad(F.embedding(ids, w), w, up), reps,
                            {"op": "embedding", "num_weights": vocab, "dim": dim, "indices": tokens, "dtype": "fp32"},
                            ">= 3x"))
    del w, ids, up
    gc.collect()
    rows_, cols = 4096 // scale, 1024
    x = torch.randn(rows_, cols, generator=g).requires_grad_()
    y, wt, pw = torch.rand(rows_, cols, generator=g), torch.rand(rows_, cols, generator=g), torch.rand(cols, generator=g) * 3
    rows.append(interleaved(f"bce_with_logits weight+pos_weight {rows_}x{cols}",
                            grad_of(lambda: tgt.binary_cross_entropy_with_logits(x, y, wt, pos_weight=pw), x),
                            grad_of(lambda: F.binary_cross_entropy_with_logits(x, y, wt, pos_weight=pw), x), reps,
                            {"op": "binary_cross_entropy_with_logits", "n": rows_, "c": cols, "dtype": "fp32",
                             "variant": "weight+pos_weight"}, ">= 2.5x"))
    return rows


def saved_tensors(fn, *leaves):
    """(shape, dtype, bytes, data pointer) of every tensor autograd saves while fn() runs
    (saved_tensors_hooks); a tensor saved twice (same memory) appears twice with the same pointer."""
    saved = []

    def pack(t):
        saved.append((tuple(t.shape), str(t.dtype).replace("torch.", ""), t.numel() * t.element_size(),
                      t.data_ptr()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn()
    torch.autograd.grad(loss, leaves)
    return saved


def cross_entropy_saved(rows, classes):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(rows, classes, generator=g).requires_grad_()
    t = torch.randint(0, classes, (rows,), generator=g)
    return {"torch": saved_tensors(lambda: F.cross_entropy(x, t), x),
            "tilegrad": saved_tensors(lambda: tgt.cross_entropy(x, t), x),
            "tilegrad z-loss": saved_tensors(lambda: tgt.cross_entropy(x, t, z_loss_scale=1e-4), x)}


def _small_cases(n, dtype, g):
    """op -> (output of a function, the leaf, tilegrad's node, torch's function, tilegrad.torch's function,
    the composite the router takes below the crossover) for fwd+bwd at about ``n`` elements;
    elementwise outputs get a contiguous upstream gradient."""
    x = torch.randn(n, generator=g).to(dtype).requires_grad_()
    y = torch.rand(n, generator=g).to(dtype)
    classes = 1000 if n >= 4000 else 16
    logits = torch.randn(max(1, n // classes), classes, generator=g).to(dtype).requires_grad_()
    target = torch.randint(0, classes, (logits.shape[0],), generator=g)
    dim = 64
    up = torch.randn(n, generator=g).to(dtype)
    up_rows = torch.randn(max(1, n // dim), dim, generator=g).to(dtype)
    table = torch.randn(64, dim, generator=g).to(dtype).requires_grad_()
    ids = torch.randint(0, 64, (max(1, n // dim),), generator=g)
    return {
        "silu": (lambda f: (f(x), up), x, TilegradSilu.apply, F.silu, tgt.silu, torch._C._nn.silu),
        "cross_entropy": (lambda f: f(logits, target), logits,
                          lambda a, t: TilegradCrossEntropy.apply(a, t, None, "mean", -100, 0.0, 0.0, False)[0],
                          F.cross_entropy, tgt.cross_entropy,
                          lambda a, t: _cross_entropy_composite(a, t, None, "mean", -100, 0.0, 0.0, False)[0]),
        "embedding": (lambda f: (f(ids, table), up_rows), table, lambda i, w: TilegradEmbedding.apply(w, i, -1, False),
                      F.embedding, tgt.embedding, lambda i, w: torch.embedding(w, i, -1, False, False)),
        "binary_cross_entropy_with_logits": (lambda f: f(x, y), x,
                                             lambda a, b: TilegradBceWithLogits.apply(a, b, None, None, 1),
                                             F.binary_cross_entropy_with_logits,
                                             tgt.binary_cross_entropy_with_logits,
                                             lambda a, b: _bce_composite(a, b, None, None, 1)),
    }


def cpu_us(fn, calls, reps=5):
    """Minimum over ``reps`` of the process CPU time per call (less disturbed by other processes on a
    shared machine than wall time), microseconds."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best * 1e6


def fwd_bwd(output_of, leaf, fn):
    """A contender: the output (a loss, or an output and its upstream gradient), autograd's gradient."""
    def run():
        out = output_of(fn)
        out, up = out if isinstance(out, tuple) else (out, None)
        return torch.autograd.grad(out, leaf, up)
    return run


def overhead_table(reps, n=1024):
    """Per-call overhead of each tilegrad.torch function over torch's (eager, forward + backward through
    autograd, 1 thread, 1K elements): what a user calls, its crossover included; and the tilegrad node
    alone (no crossover). Contenders interleaved, minimum of the repetitions."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(6)
    print("| op | dtype | torch us | tilegrad.torch us | overhead us | tilegrad node us | node overhead us |"
          "\n|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for op, (loss_of, leaf, node, theirs, ours, _) in _small_cases(n, dtype, g).items():
            best = _fastest({"torch": theirs, "public": ours, "node": node}, loss_of, leaf, 200, reps)
            print(f"| {op} | {NAMES[dtype]} | {best['torch']:.1f} | {best['public']:.1f} | "
                  f"{best['public'] - best['torch']:+.1f} | {best['node']:.1f} | {best['node'] - best['torch']:+.1f} |",
                  flush=True)


def crossover_table(reps, quick=False):
    """tilegrad's node (whatever the size) vs the composite the router takes below the crossover
    (torch ops with the kernel's numerics: 16-bit tensors widened to float32, each result rounded once)
    and vs torch's own function, forward + backward, 1 thread, 1K..1M elements. Each cell: composite /
    node (> 1: the node faster; where it passes 1 is the CROSSOVER entry, tilegrad.torch._eager), then
    torch / node in parentheses. Then cross entropy with few classes (N=65536). ``quick``: the two
    smallest sizes and N=1024 (a smoke run, not a measurement)."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(7)
    ops = list(_small_cases(1024, torch.float32, g))
    print("composite / node (torch / node)\n")
    print("| dtype | elements | " + " | ".join(ops) + " |\n|---|---|" + "---|" * len(ops))
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1024, 4096) if quick else (1024, 4096, 16384, 65536, 262144, 1 << 20):
            calls = max(3, 100000 // n)
            cells = []
            for loss_of, leaf, node, theirs, _, composite in _small_cases(n, dtype, g).values():
                best = _fastest({"node": node, "composite": composite, "torch": theirs}, loss_of, leaf, calls, reps)
                cells.append(f"{best['composite'] / best['node']:.2f}x ({best['torch'] / best['node']:.2f}x)")
            print(f"| {NAMES[dtype]} | {n} | " + " | ".join(cells) + " |", flush=True)
    rows = 1024 if quick else 65536
    print(f"\n| dtype | cross_entropy N={rows}, C = | composite ms | torch ms | tilegrad node ms | composite / node "
          "| torch / node |\n|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for classes in (2, 16, 64, 256):
            x = torch.randn(rows, classes, generator=g).to(dtype).requires_grad_()
            t = torch.randint(0, classes, (rows,), generator=g)
            loss_of, leaf, node, theirs, _, composite = _small_cases(1024, dtype, g)["cross_entropy"]
            best = _fastest({"node": node, "composite": composite, "torch": theirs}, lambda f: f(x, t), x, 3, reps)
            print(f"| {NAMES[dtype]} | {classes} | {best['composite'] / 1e3:.2f} | {best['torch'] / 1e3:.2f} | "
                  f"{best['node'] / 1e3:.2f} | {best['composite'] / best['node']:.2f}x | "
                  f"{best['torch'] / best['node']:.2f}x |", flush=True)


def _fastest(contenders, loss_of, leaf, calls, reps):
    """name -> the minimum over ``reps`` interleaved rounds of each contender's CPU us per fwd+bwd call."""
    best = {name: float("inf") for name in contenders}
    for _ in range(reps):
        for name, fn in contenders.items():
            best[name] = min(best[name], cpu_us(fwd_bwd(loss_of, leaf, fn), calls, reps=1))
    return best


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, 3 repetitions")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (tilegrad follows); "
                        "default: torch's")
    parser.add_argument("--interleaved", action="store_true", help="only the README's table: each tilegrad call "
                        "followed by torch's, alternating, each timed (with its minor page faults)")
    parser.add_argument("--overhead", action="store_true", help="only the per-op overhead table (1K elements)")
    parser.add_argument("--crossover", action="store_true", help="only the small-size table behind "
                        "tilegrad.torch._eager.CROSSOVER")
    args = parse_args(parser)
    if args.overhead or args.crossover:
        print(f"# 1 thread, process CPU time, load average {os.getloadavg()[0]:.2f}")
        if args.overhead:
            overhead_table(args.reps)
        else:
            crossover_table(args.reps, quick=args.quick)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    reps = 3 if args.quick else args.reps
    scale = 8 if args.quick else 1
    print(f"# tilegrad.torch {tg.__version__} ({tg.active_isa()}) vs torch {torch.__version__} eager, "
          f"{torch.get_num_threads()} threads, forward+backward through autograd, min of {reps}, "
          f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.interleaved:
        print_table(interleaved_rows(reps, scale), "interleaved: tilegrad's call, then torch's, alternating")
        return

    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        rows.append(cross_entropy_case(8192 // scale, 32000, dtype, reps))
        gc.collect()
    rows += embedding_cases(32000 // scale, 4096 // scale, 8192, reps)
    gc.collect()
    rows.append(bce_case(4096 // scale, 1024, reps))
    rows.append(silu_case((16 << 20) // scale, reps))
    gc.collect()
    print_table(rows, "forward + backward through autograd")
    print()
    print_table(kernel_floor_rows(8192 // scale, 32000, 32000 // scale, 4096 // scale, 8192, reps),
                "kernel floor: tilegrad's NumPy entry points into reused outputs (no autograd allocation)")

    overhead = per_call_overhead(1024, max(reps, 25))  # short loops, many reps: the least-disturbed one
    print()
    markdown(["per-call (1K fp32 silu_backward, fresh output)", "NumPy entry us", "torch.ops us", "overhead us",
              "target"], [["tilegrad", f"{overhead['numpy us/call']:.1f}", f"{overhead['torch.ops us/call']:.1f}",
                           f"{overhead['overhead us']:.1f}", "<= 15 us"]])

    inter = interleaving(reps)
    print()
    markdown(["interleaving", "tilegrad CE 512x32000 fwd+bwd ms", "torch GEMM 1024^3 ms", "sum alone ms",
              "alternating ms", "slowdown", "target"],
             [["tilegrad + torch", f"{inter['tilegrad ms']:.2f}", f"{inter['torch ms']:.2f}",
               f"{inter['sum ms']:.2f}", f"{inter['interleaved ms']:.2f}", f"{inter['slowdown %']:+.1f}%",
               "a few %"]])

    saved = cross_entropy_saved(1024, 32000)
    print()
    markdown(["cross_entropy 1024x32000 fp32 saves", "tensors (shape dtype)", "distinct bytes"],
             [[name, ", ".join(f"{s} {d}" for s, d, _, _ in items),
               f"{sum({p: b for _, _, b, p in items}.values()):,}"] for name, items in saved.items()])


if __name__ == "__main__":
    main()
