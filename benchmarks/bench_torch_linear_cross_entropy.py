"""tilegrad.torch.linear_cross_entropy through autograd vs F.linear_cross_entropy, side by side (issue 20).

    python benchmarks/bench_torch_linear_cross_entropy.py [--bt 4096 --h 2048 --v 32000] [--reps 3]
                                                          [--only speed,frozen,memory,small]

Contenders, interleaved, min of the repetitions, process CPU time (the machine is shared):
- "torch": F.linear_cross_entropy(...).backward() (default options: full logits);
- "tilegrad": tgt.linear_cross_entropy(...).backward();
- "before": torch.ops.tilegrad.linear_cross_entropy, the op the eager path called before issue 20
  (both gradients in the forward whatever autograd needs).
Cases: fp32 and bf16 forward + backward ("speed"), a frozen weight ("frozen": only the input
gradient), peak extra RSS of 8 chunked forwards then one backward in a fresh subprocess per
contender ("memory"), and forward + backward wall time at tiny sizes ("small": the crossover).
"""

import argparse
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import tilegrad.torch as tgt
from tilegrad.torch._eager import CROSSOVER


def _tilegrad(x, w, t):
    return tgt.linear_cross_entropy(x, w, t)


def _before(x, w, t):
    return torch.ops.tilegrad.linear_cross_entropy(x, w, t, None, None, -100, 0.0, 1, 0.0)[0]


def _torch(x, w, t):
    return F.linear_cross_entropy(x, w, t)


CONTENDERS = {"torch": _torch, "tilegrad": _tilegrad, "before": _before}


def _problem(bt, h, v, dtype, weight_grad=True):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(bt, h, generator=g) * 0.5).to(dtype).requires_grad_()
    w = (torch.randn(v, h, generator=g) * 0.02).to(dtype).requires_grad_(weight_grad)
    t = torch.randint(0, v, (bt,), generator=g)
    return x, w, t


def _cpu_time(fn, x, w, t):
    x.grad = None
    w.grad = None
    start = time.process_time()
    fn(x, w, t).backward()
    return time.process_time() - start


def speed(args, weight_grad):
    for dtype in (torch.float32, torch.bfloat16):
        x, w, t = _problem(args.bt, args.h, args.v, dtype, weight_grad)
        best = {name: float("inf") for name in CONTENDERS}
        for _ in range(args.reps):
            for name, fn in CONTENDERS.items():
                best[name] = min(best[name], _cpu_time(fn, x, w, t))
        kind = "fwd+bwd" if weight_grad else "frozen weight fwd+bwd"
        print(f"{kind} {str(dtype)[6:]} BT={args.bt} H={args.h} V={args.v}: " +
              ", ".join(f"{n} {s * 1e3:.0f} ms" for n, s in best.items()) +
              f"; torch/tilegrad {best['torch'] / best['tilegrad']:.2f}x, "
              f"before/tilegrad {best['before'] / best['tilegrad']:.2f}x", flush=True)


def _memory_child(name, bt, h, v, dtype_name):
    dtype = getattr(torch, dtype_name)
    fn = CONTENDERS[name]
    x, w, t = _problem(8, 16, 32, dtype)  # warm-up: library code resident, nothing problem-sized cached
    fn(x, w, t).backward()
    x, w, t = _problem(bt, h, v, dtype)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    losses = [fn(xc, w, tc) for xc, tc in zip(x.chunk(8), t.chunk(8))]
    sum(losses).backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((peak - base) / 1024)


def memory(args):
    for dtype in ("float32", "bfloat16"):
        found = {}
        for name in CONTENDERS:
            out = subprocess.run([sys.executable, __file__, "--child", name, str(args.bt), str(args.h), str(args.v),
                                  dtype], capture_output=True, text=True, check=True)
            found[name] = float(out.stdout.split()[-1])
        print(f"8 chunked forwards + 1 backward {dtype} BT={args.bt} H={args.h} V={args.v}: peak extra RSS " +
              ", ".join(f"{n} {m:.0f} MiB" for n, m in found.items()), flush=True)


def small(args):
    saved = CROSSOVER["linear_cross_entropy"]
    for bt, h, v in ((4, 8, 16), (16, 32, 64), (32, 64, 128), (64, 64, 256), (64, 128, 512), (128, 128, 1024)):
        x, w, t = _problem(bt, h, v, torch.float32)
        best = {}
        for label, crossover in (("torch", None), ("tilegrad kernel", 0)):
            fn = _torch if crossover is None else _tilegrad
            CROSSOVER["linear_cross_entropy"] = {} if crossover == 0 else saved
            times = []
            for _ in range(args.reps * 100):
                start = time.perf_counter()
                fn(x, w, t).backward()
                times.append(time.perf_counter() - start)
            best[label] = min(times)
        CROSSOVER["linear_cross_entropy"] = saved
        print(f"small BT={bt} H={h} V={v} ({bt * h * v} MACs): torch {best['torch'] * 1e6:.0f} us, tilegrad kernel "
              f"{best['tilegrad kernel'] * 1e6:.0f} us (+{(best['tilegrad kernel'] - best['torch']) * 1e6:.0f} us)",
              flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        name, bt, h, v, dtype = sys.argv[2:7]
        return _memory_child(name, int(bt), int(h), int(v), dtype)
    p = argparse.ArgumentParser()
    p.add_argument("--bt", type=int, default=4096)
    p.add_argument("--h", type=int, default=2048)
    p.add_argument("--v", type=int, default=32000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", default="speed,frozen,memory,small")
    args = p.parse_args()
    torch.set_num_threads(2)
    parts = args.only.split(",")
    if "speed" in parts:
        speed(args, True)
    if "frozen" in parts:
        speed(args, False)
    if "memory" in parts:
        memory(args)
    if "small" in parts:
        small(args)


if __name__ == "__main__":
    main()
