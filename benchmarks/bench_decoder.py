"""The decoder-block functions through autograd: tilegrad.torch vs PyTorch eager vs torch.compile of
the same PyTorch code, forward + backward, same inputs, one process, contenders interleaved.

    python benchmarks/bench_decoder.py [--quick] [--reps N] [--json PATH] [--no-compile] [--dtypes fp32,bf16]
                                       [--threads N]
    python benchmarks/bench_decoder.py --crossover     # small sizes: where the router's composite wins
    python benchmarks/bench_decoder.py --kernel-cpu-time   # kernels alone in CPU time vs the DRAM probe

Cases and the issue's targets (tilegrad / eager, tilegrad / compiled):

- RMSNorm 4096x2048 (weight 2048) float32 / bfloat16: >= 5x / >= 10x eager, >= 1.3x compiled
- silu_mul 4096x5632 float32 / bfloat16: >= 2x eager, >= 1.3x compiled
- RoPE on q and k (batch 4, seq 1024, 16 q heads, 4 kv heads, head dim 128) float32 / bfloat16:
  >= 3x eager, >= 1.3x compiled (Hugging Face's rotate-half composite)
- gelu (tanh) 4096x5632 and gelu_mul (tanh; Gemma's MLP) 4096x5632 float32 / bfloat16: >= 2x eager

Each contender computes the output and autograd's gradients of every input that requires one
(``torch.autograd.grad`` with a fixed upstream gradient). Also printed: the bytes each saves for
backward (``torch.autograd.graph.saved_tensors_hooks``), tilegrad vs the composite, and tilegrad's
share of the machine's DRAM bandwidth for the case's compulsory traffic (forward + backward):

- RMSNorm: x read twice, y written, dy read, dx written: 5 tensors (rstd and gamma are negligible)
- silu_mul, gelu_mul: gate and up read twice, out written, dy read, dgate and dup written: 8 tensors
- gelu: x read twice, y written, dy read, dx written: 5 tensors
- RoPE: q and k read, written, their gradients read and written (4 tensors each), cos and sin read
  once per pass (4 tables of batch x seq x head_dim)

The bandwidth is measured in the same run, interleaved with the contenders of every case: out = a + b
on float32 with all threads and non-temporal stores (``tilegrad._core._bandwidth_probe``, as
bench_silu_backward.py does; ``_harness.BandwidthProbe``) on 64 MiB arrays (above the 32 MiB L3), 12 bytes per
element.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import AutogradBenchmark, BandwidthProbe, crossover_table  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegrad  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._gelu import TilegradGelu, TilegradGeluMul, _gelu_composite, _gelu_mul_composite  # noqa: E402
from tilegrad.torch._rms_norm import TilegradRmsNorm, _rms_norm_composite  # noqa: E402
from tilegrad.torch._rope import TilegradRope, _rope_composite  # noqa: E402
from tilegrad.torch._swiglu import (TilegradSiluMul, TilegradSwiGlu, _silu_mul_composite,  # noqa: E402
                                    _swi_glu_composite)

def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_rope(q, k, cos, sin):
    """Hugging Face's apply_rotary_pos_emb (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def torch_rms_norm(x, w):
    return F.rms_norm(x, w.shape, w, 1e-6)


def torch_silu_mul(g, u):
    return F.silu(g) * u


def torch_gelu(x):
    return F.gelu(x, approximate="tanh")


def torch_gelu_mul(g, u):
    return F.gelu(g, approximate="tanh") * u


def crossover_contenders(dtype, n):
    """Each decoder function on n elements (rows of 128 features): (node, composite, torch), each
    forward + backward."""
    rows = n // 128
    x = torch.randn(rows, 128, dtype=dtype, requires_grad=True)
    w = torch.ones(128, dtype=dtype, requires_grad=True)
    dy = torch.randn(rows, 128, dtype=dtype)
    wide = torch.randn(rows, 256, dtype=dtype, requires_grad=True)  # swiglu halves its last dim
    q = torch.randn(1, 1, rows, 128, dtype=dtype, requires_grad=True)
    cos = torch.randn(1, 1, rows, 128, dtype=dtype)
    dq = dy.view(q.shape)
    return [
        (lambda: TilegradRmsNorm.apply(x, w, 1e-6, 0.0).backward(dy),
         lambda: _rms_norm_composite(x, w, 1e-6).backward(dy), lambda: torch_rms_norm(x, w).backward(dy)),
        (lambda: TilegradSiluMul.apply(x, x).backward(dy), lambda: _silu_mul_composite(x, x).backward(dy),
         lambda: torch_silu_mul(x, x).backward(dy)),
        (lambda: TilegradSwiGlu.apply(wide, 1).backward(dy), lambda: _swi_glu_composite(wide, 1).backward(dy),
         lambda: torch_silu_mul(*wide.chunk(2, 1)).backward(dy)),
        (lambda: TilegradRope.apply(q, cos, cos, 0).backward(dq), lambda: _rope_composite(q, cos, cos, 0).backward(dq),
         lambda: (q * cos + rotate_half(q) * cos).backward(dq)),
        (lambda: TilegradGelu.apply(x, "tanh").backward(dy), lambda: _gelu_composite(x, "tanh").backward(dy),
         lambda: torch_gelu(x).backward(dy)),
        (lambda: TilegradGeluMul.apply(x, x, "tanh").backward(dy),
         lambda: _gelu_mul_composite(x, x, "tanh").backward(dy), lambda: torch_gelu_mul(x, x).backward(dy)),
    ]


def kernel_cpu_time_table(reps: int = 7) -> None:
    """The kernels alone (NumPy API, preallocated outputs) and the bandwidth probe, interleaved, in
    process CPU time (min of `reps`): on a loaded machine the wall time of a 40 ms call includes other
    processes' time slices, its CPU time does not. One thread: the time is the kernel's own."""
    import ml_dtypes

    torch.set_num_threads(1)
    tilegrad.set_num_threads(1)
    probe = BandwidthProbe()
    rng = np.random.default_rng(0)
    print("| dtype | kernel | CPU ms | GB/s | share of the probe |\n|---|---|---|---|---|")
    for dtype in (np.float32, ml_dtypes.bfloat16):
        x = rng.standard_normal((4096, 2048)).astype(dtype)
        g, dy = np.ones(2048, dtype), x.copy()
        y, dx = np.empty_like(x), np.empty_like(x)
        rstd, dg = np.empty((4096, 1), np.float32), np.empty(2048, np.float32)
        gate = rng.standard_normal((4096, 5632)).astype(dtype)
        up, dh, h, d_gate, d_up = gate.copy(), gate.copy(), np.empty_like(gate), np.empty_like(gate), np.empty_like(gate)
        es = x.itemsize
        kernels = {  # name: (call, compulsory bytes)
            "rms_norm": (lambda: tilegrad.rms_norm(x, g, 1e-6, out=y, rstd_out=rstd), 2 * x.size * es),
            "rms_norm_grad": (lambda: tilegrad.rms_norm_grad(dy, x, rstd, g, out=dx, dgamma_out=dg), 3 * x.size * es),
            "silu_mul": (lambda: tilegrad.silu_mul(gate, up, out=h), 3 * gate.size * es),
            "silu_mul_grad": (lambda: tilegrad.silu_mul_grad(dh, gate, up, out=(d_gate, d_up)), 5 * gate.size * es),
        }
        calls = {name: fn for name, (fn, _) in kernels.items()}
        calls["probe"] = probe
        best = {name: float("inf") for name in calls}
        for fn in calls.values():
            fn()
        for _ in range(reps):
            for name, fn in calls.items():
                t0 = time.process_time()
                fn()
                best[name] = min(best[name], time.process_time() - t0)
        dram = probe.gbps(best["probe"])
        for name, (_, nbytes) in kernels.items():
            gbps = nbytes / best[name] / 1e9
            print(f"| {np.dtype(dtype).name} | {name} | {best[name] * 1e3:.1f} | {gbps:.1f} | "
                  f"{100 * gbps / dram:.0f}% of {dram:.1f} |", flush=True)


def main() -> None:
    bench = AutogradBenchmark(__doc__, crossover_help="the small-size table behind the decoder functions' entries "
                              "of tilegrad.torch._eager.CROSSOVER")
    bench.parser.add_argument("--kernel-cpu-time", action="store_true",
                              help="the kernels alone in process CPU time vs the bandwidth probe (1 thread)")
    args = bench.start("decoder")
    if args.crossover:
        crossover_table(["rms_norm", "silu_mul", "swiglu", "rope", "gelu", "gelu_mul"],
                        [1024, 4096, 16384, 65536, 262144], crossover_contenders, args.quick)
        return
    if args.kernel_cpu_time:
        kernel_cpu_time_table()
        return
    scale = 8 if args.quick else 1
    g = torch.Generator().manual_seed(0)

    def cases(dtype, name):
        es = torch.empty((), dtype=dtype).element_size()
        rows = []
        n, d = 4096 // scale, 2048
        x = torch.randn(n, d, generator=g).to(dtype).requires_grad_()
        w = (1 + 0.1 * torch.randn(d, generator=g)).to(dtype).requires_grad_()
        rows.append(bench.case(f"rms_norm {name} {n}x{d}", {"op": "rms_norm", "n": n, "d": d, "dtype": name},
                               lambda a, b: tgt.rms_norm(a, b.shape, b, 1e-6), torch_rms_norm, [x, w],
                               (torch.randn(n, d, generator=g).to(dtype),),
                               ">= 5x fp32, >= 10x bf16; >= 1.3x compile", 5 * n * d * es))
        n, f = 4096 // scale, 5632
        gate = torch.randn(n, f, generator=g).to(dtype).requires_grad_()
        up = torch.randn(n, f, generator=g).to(dtype).requires_grad_()
        rows.append(bench.case(f"silu_mul {name} {n}x{f}", {"op": "silu_mul", "n": n, "f": f, "dtype": name},
                               tgt.silu_mul, torch_silu_mul, [gate, up], (torch.randn(n, f, generator=g).to(dtype),),
                               ">= 2x; >= 1.3x compile", 8 * n * f * es))
        rows.append(bench.case(f"gelu tanh {name} {n}x{f}", {"op": "gelu", "n": n, "f": f, "dtype": name},
                               lambda a: tgt.gelu(a, approximate="tanh"), torch_gelu, [gate],
                               (torch.randn(n, f, generator=g).to(dtype),), ">= 2x", 5 * n * f * es))
        rows.append(bench.case(f"gelu_mul tanh {name} {n}x{f}", {"op": "gelu_mul", "n": n, "f": f, "dtype": name},
                               tgt.gelu_mul, torch_gelu_mul, [gate, up], (torch.randn(n, f, generator=g).to(dtype),),
                               ">= 2x", 8 * n * f * es))
        b, s, hq, hkv, hd = 4, 1024 // scale, 16, 4, 128
        # (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim) projections, as Llama makes them
        q = torch.randn(b, s, hq, hd, generator=g).to(dtype).transpose(1, 2).requires_grad_()
        k = torch.randn(b, s, hkv, hd, generator=g).to(dtype).transpose(1, 2).requires_grad_()
        angle = torch.randn(b, s, hd, generator=g)
        cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
        upstream = (torch.randn(q.shape, generator=g).to(dtype), torch.randn(k.shape, generator=g).to(dtype))
        rows.append(bench.case(f"rope q+k {name} b{b} s{s} {hq}/{hkv} heads d{hd}",
                               {"op": "rope", "b": b, "s": s, "hq": hq, "hkv": hkv, "d": hd, "dtype": name},
                               lambda q_, k_, c, s_: tgt.apply_rotary_pos_emb(q_, k_, c, s_), hf_rope,
                               [q, k, cos, sin], upstream, ">= 3x; >= 1.3x compile",
                               (4 * (q.numel() + k.numel()) + 4 * cos.numel()) * es))
        return rows
    bench.run(cases, title="decoder block through autograd")


if __name__ == "__main__":
    main()
