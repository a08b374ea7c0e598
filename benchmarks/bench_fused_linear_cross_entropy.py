"""Fused linear cross entropy: tilegrad vs PyTorch, side by side in one run.

    python benchmarks/bench_fused_linear_cross_entropy.py [--quick] [--no-memory]

Cases (BT=1024, H=2048, V=32000; --quick: 256, 512, 4000), bf16 and fp32:
- "gradient": tg.fused_linear_cross_entropy_loss_grad, memory-saving mode (logits recomputed block by
  block), vs PyTorch's naive composite (matmul, float softmax, subtract 1 at the target, scale, two
  matmuls).
- "fused fwd+bwd": tg.fused_linear_cross_entropy (loss and both gradients; at this size the logits
  exceed its 64 MiB whole-logits budget, so it runs forward blocks + the memory-saving gradient: four
  GEMMs) vs torch.nn.functional.linear_cross_entropy forward + backward; "whole logits" forces the
  three-GEMM path over one (BT x V) fp32 buffer (TILEGRAD_FLCE_WHOLE_BUDGET).
- the ceiling: as many plain oneDNN matmuls of the logits shape (the wrapper the operators use) as
  the operator runs GEMMs, timed interleaved with the two contenders.

GEMM efficiency = ceiling time / tilegrad time (both under the same machine noise). Peak extra memory is
measured in a fresh subprocess per contender: peak RSS (VmHWM) minus RSS after the inputs exist,
minus the gradients' own bytes (both sides return the same outputs).
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import compare, print_table  # noqa: E402

import ml_dtypes  # noqa: E402

import tilegrad as tg  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def make(bt, h, v, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((bt, h)) * 0.5).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((v, h)) * 0.02).astype(np.float32).astype(dtype)
    t = rng.integers(0, v, bt).astype(np.int64)
    return x, w, t


def tilegrad_grad_fn(x, w, t):
    v = w.shape[0]
    mx, s, _, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
    g = np.full(x.shape[0], 1.0 / x.shape[0], np.float32)
    return lambda: tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)


def torch_tensors(x, w, t, torch):
    tdt = torch.bfloat16 if x.dtype == BF16 else torch.float32
    xt = torch.from_numpy(x.view(np.uint16) if x.dtype == BF16 else x)
    wt = torch.from_numpy(w.view(np.uint16) if w.dtype == BF16 else w)
    if x.dtype == BF16:
        xt, wt = xt.view(torch.bfloat16), wt.view(torch.bfloat16)
    return xt.to(tdt), wt.to(tdt), torch.from_numpy(t)


def torch_naive_grad_fn(x, w, t, torch):
    xt, wt, tt = torch_tensors(x, w, t, torch)
    bt = xt.shape[0]
    g = torch.full((bt,), 1.0 / bt)
    rows = torch.arange(bt)

    def run():
        logits = xt @ wt.T
        p = torch.softmax(logits.float(), dim=-1)
        p[rows, tt] -= 1.0
        p *= g[:, None]
        gh = p.to(xt.dtype)
        return gh @ wt, gh.T @ xt

    return run


def torch_fused_fn(x, w, t, torch):
    xt, wt, tt = torch_tensors(x, w, t, torch)

    def run():
        xg = xt.detach().requires_grad_(True)
        wg = wt.detach().requires_grad_(True)
        loss = torch.nn.functional.linear_cross_entropy(xg, wg, tt)
        loss.backward()
        return loss, xg.grad, wg.grad

    return run


def contender(name, x, w, t):
    if name == "tilegrad_grad":
        return tilegrad_grad_fn(x, w, t)
    if name == "tilegrad_fused":
        return lambda: tg.fused_linear_cross_entropy(x, w, t)
    if name == "tilegrad_fused_whole":  # force the three-GEMM path over the whole (BT x V) fp32 logits
        def run():
            os.environ["TILEGRAD_FLCE_WHOLE_BUDGET"] = str(1 << 40)
            try:
                return tg.fused_linear_cross_entropy(x, w, t)
            finally:
                del os.environ["TILEGRAD_FLCE_WHOLE_BUDGET"]
        return run
    import torch
    torch.set_num_threads(tg.get_num_threads())
    if name == "torch_naive_grad":
        return torch_naive_grad_fn(x, w, t, torch)
    if name == "torch_fused":
        return torch_fused_fn(x, w, t, torch)
    raise ValueError(name)


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memory_probe(name, bt, h, v, dtype_name):
    """Runs in a fresh process: prints the peak extra bytes of one call."""
    dtype = BF16 if dtype_name == "bfloat16" else np.dtype(dtype_name)
    x, w, t = make(bt, h, v, dtype)
    fn = contender(name, x, w, t)  # forward statistics for the gradient op are computed here (not counted)
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM to the current RSS
        f.write("5")
    out = fn()
    peak = _status_kb("VmHWM")
    del out
    grads = (bt * h + v * h) * dtype.itemsize
    print(max(0, (peak - base) * 1024 - grads))


def peak_extra(name, bt, h, v, dtype):
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mem-probe", name, str(bt), str(h), str(v),
                            dtype.name], capture_output=True, text=True, timeout=600)
        return int(r.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001
        print(f"memory probe {name} failed: {e}", file=sys.stderr)
        return -1


def mib(b):
    return "n/a" if b < 0 else f"{b / 2**20:.0f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small shapes, few repetitions (smoke run)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    ap.add_argument("--mem-probe", nargs=5, metavar=("NAME", "BT", "H", "V", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mem_probe:
        name, bt, h, v, dt = args.mem_probe
        memory_probe(name, int(bt), int(h), int(v), dt)
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: nothing to compare against")
        return
    bt, h, v = (256, 512, 4000) if args.quick else (1024, 2048, 32000)
    reps = 2 if args.quick else 3
    threads = tg.get_num_threads()
    print(f"BT={bt} H={h} V={v}, {threads} threads, tilegrad {tg.__version__}, {tg.active_isa()}")
    flop = 2.0 * bt * h * v  # one (BT x V x H) GEMM
    rows = []
    notes = []
    for dtype in (BF16, np.dtype(np.float32)):
        x, w, t = make(bt, h, v, dtype)
        out = np.empty((bt, v), np.float32)
        impl = tg._core._onednn_matmul(x, w.T, out, threads)
        best_plain = float("inf")
        for case, ours, theirs, gemms in (("gradient", "tilegrad_grad", "torch_naive_grad", 3),
                                          ("fused fwd+bwd", "tilegrad_fused", "torch_fused", 4),
                                          ("fused fwd+bwd, whole logits", "tilegrad_fused_whole", "torch_fused", 3)):
            # the ceiling: the same number of plain oneDNN matmuls of the logits shape, timed interleaved
            def ceiling(n=gemms):
                for _ in range(n):
                    tg._core._onednn_matmul(x, w.T, out, threads)
            fns = {"torch": contender(theirs, x, w, t), "tilegrad": contender(ours, x, w, t),
                   "oneDNN GEMMs only": ceiling}
            extra = {}
            if not args.no_memory:
                mt, mo = peak_extra(theirs, bt, h, v, dtype), peak_extra(ours, bt, h, v, dtype)
                extra = {"torch extra mem": mib(mt), "tilegrad extra mem": mib(mo),
                         "mem ratio": f"{mo / mt:.2f}" if mt > 0 and mo >= 0 else "n/a"}
            row = compare(f"{case} {dtype.name}", fns, baseline="torch", reps=reps, extra=extra)
            eff = row["times"]["oneDNN GEMMs only"] / row["times"]["tilegrad"]
            best_plain = min(best_plain, row["times"]["oneDNN GEMMs only"] / gemms)
            row.setdefault("extra", {})["GEMM eff"] = f"{eff * 100:.0f}% ({gemms} GEMMs)"
            for k in ("torch extra mem", "tilegrad extra mem", "mem ratio"):
                row["extra"].setdefault(k, "")
            rows.append(row)
        notes.append(f"- oneDNN plain matmul {dtype.name} [{bt}x{h}]@[{h}x{v}]: {flop / best_plain / 1e9:.0f} GFLOP/s, "
                     f"implementation `{impl}`")
    print_table(rows, title=f"fused linear cross entropy, BT={bt} H={h} V={v}")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
