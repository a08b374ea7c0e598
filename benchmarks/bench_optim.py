"""AdamW step on a Llama-like parameter set (~134M parameters in 111 tensors: one 32000x768
embedding, an untied 32000x768 head, 12 layers of four 768x768 and three 768x2048 matrices, 25 norm
vectors): tilegrad.torch.optim.AdamW against PyTorch, side by side in one process (contenders
interleaved per round, minimum of the repetitions).

Cases:
  fp32        torch.optim.AdamW(fused=True)                      vs tilegrad AdamW
  fp32 clip   clip_grad_norm_(1.0) + AdamW(fused=True)           vs tilegrad AdamW(max_grad_norm=1.0)
  fp32 default torch.optim.AdamW() (what most users run)         vs tilegrad AdamW
  bf16        torch bf16 params, AdamW(fused=True) (bf16 states) vs tilegrad AdamW(master_weights=True)

The ceiling row is tilegrad._core._bandwidth_probe (out = a + b, fp32, all threads, streaming
stores) timed interleaved on 32M-element buffers: the machine's DRAM bandwidth. "% of DRAM" is the
bytes every fp32 AdamW must move (read param, grad, exp_avg, exp_avg_sq; write param, exp_avg,
exp_avg_sq: 28 bytes per parameter) over the step time, against that bandwidth.

    python benchmarks/bench_optim.py [--reps 5] [--layers 12] [--threads N] [--skip-default] [--json results.jsonl]
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as h  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad import _core  # noqa: E402


def llama_shapes(layers: int, vocab: int = 32000, dim: int = 768, hidden: int = 2048):
    shapes = [(vocab, dim)]
    for _ in range(layers):
        shapes += [(dim,), (dim, dim), (dim, dim), (dim, dim), (dim, dim), (dim,), (hidden, dim), (hidden, dim),
                   (dim, hidden)]
    return shapes + [(dim,), (vocab, dim)]


def make_params(shapes, dtype):
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter((torch.randn(s, generator=g) * 0.02).to(dtype)) for s in shapes]
    for p in params:
        p.grad = (torch.randn(p.shape, generator=g) * 1e-3).to(dtype)
    return params


def stepper(opt, clip_params=None):
    def run():
        if clip_params is not None:
            torch.nn.utils.clip_grad_norm_(clip_params, 1.0)
        opt.step()
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--skip-default", action="store_true", help="skip torch's (slow) default AdamW")
    parser.add_argument("--threads", type=int, help="torch (and so tilegrad) threads (default: torch's)")
    args = h.parse_args(parser)
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = llama_shapes(args.layers)
    n = sum(int(np.prod(s)) for s in shapes)
    print(f"{n / 1e6:.1f}M parameters in {len(shapes)} tensors; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, tilegrad ISA {_core.active_isa()}")
    rows = []

    # fp32: one parameter set, each optimizer with its own state (timing only: values drift alike).
    params = make_params(shapes, torch.float32)
    probe_n = 32 << 20
    a, b, out = (np.ones(probe_n, np.float32) for _ in range(3))
    fused = torch.optim.AdamW(params, lr=1e-4, fused=True)
    ours = tgt.optim.AdamW(params, lr=1e-4)
    row = h.compare("fp32 step", {"torch fused": stepper(fused), "tilegrad": stepper(ours),
                                  "ceiling": lambda: _core._bandwidth_probe(out, a, b, True)},
                    baseline="torch fused", reps=args.reps, params={"params": n, "dtype": "fp32"})
    ceiling_bw = 12 * probe_n / row["times"].pop("ceiling")
    bw = 28 * n / row["times"]["tilegrad"]
    row["extra"] = {"tilegrad GB/s": f"{bw / 1e9:.1f}",
                    "% of DRAM": f"{100 * bw / ceiling_bw:.0f}% (probe {ceiling_bw / 1e9:.1f} GB/s)"}
    rows.append(row)

    clipped = tgt.optim.AdamW(params, lr=1e-4, max_grad_norm=1.0)
    rows.append(h.compare("fp32 step + clip 1.0", {"torch clip+fused": stepper(fused, params),
                                                   "tilegrad": stepper(clipped)},
                          baseline="torch clip+fused", reps=args.reps, params={"params": n, "dtype": "fp32"}))
    del a, b, out
    if not args.skip_default:
        default = torch.optim.AdamW(params, lr=1e-4)
        rows.append(h.compare("fp32 step, torch default", {"torch default": stepper(default), "tilegrad": stepper(ours)},
                              baseline="torch default", reps=max(2, args.reps // 2),
                              params={"params": n, "dtype": "fp32"}))
        del default
    del fused, ours, clipped, params

    low = make_params(shapes, torch.bfloat16)
    torch_bf16 = torch.optim.AdamW(low, lr=1e-4, fused=True)
    master = tgt.optim.AdamW(low, lr=1e-4, master_weights=True)
    rows.append(h.compare("bf16 params", {"torch bf16 fused": stepper(torch_bf16),
                                          "tilegrad fp32 masters": stepper(master)},
                          baseline="torch bf16 fused", reps=args.reps, params={"params": n, "dtype": "bf16"}))
    print("AdamW step (machine shared with other jobs: compare ratios)")
    for row in rows:  # each case has its own contenders
        h.print_table([row])


if __name__ == "__main__":
    main()
