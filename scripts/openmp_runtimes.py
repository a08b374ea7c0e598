"""How many OpenMP runtimes a process with tilegrad, oneDNN (and PyTorch) holds, and what it costs.

Loads tilegrad and, unless --no-torch, torch (in the order given), then times three steps alone and
interleaved: a torch step (matmul + SiLU, torch's OpenMP pool), a tilegrad step (silu_backward,
tilegrad's kernels) and a tilegrad fused linear cross entropy step (tilegrad kernels and oneDNN GEMMs
in one call). Two OpenMP runtimes in one process mean two thread pools whose idle workers spin
against each other's work, so "interleaved" grows well above the sum of the steps alone.

Prints the libgomp copies mapped (from /proc/self/maps), the threads alive, and the times (min of
--repeats). With --expect-one it exits 1 unless exactly one OpenMP runtime is mapped (check_wheel.sh).

    python scripts/openmp_runtimes.py [--order torch-first|tilegrad-first] [--no-torch] [--expect-one]
"""

import argparse
import importlib
import os
import sys
import time
from typing import Callable, Dict, List, Tuple


def openmp_runtimes() -> List[str]:
    """Distinct OpenMP runtime files mapped into this process (libgomp*, libomp*, libiomp*)."""
    seen: Dict[str, str] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) < 6:
                continue
            path = parts[5]
            name = os.path.basename(path)
            if name.startswith(("libgomp", "libomp", "libiomp")):
                seen.setdefault(f"{parts[3]}:{parts[4]}", path)  # device:inode identifies the file
    return sorted(seen.values())


def thread_count() -> int:
    """Threads alive in this process (the OpenMP workers of every pool among them)."""
    return len(os.listdir("/proc/self/task"))


def best_time(step: Callable[[], None], repeats: int, calls: int) -> Tuple[float, float]:
    """(wall, CPU) seconds of `calls` back-to-back calls of step, each the minimum over repeats.

    CPU time is the whole process's (all threads): OpenMP workers spinning idle in a second thread
    pool show up there even when other load on the machine blurs the wall time."""
    step()
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            step()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


def make_steps(use_torch: bool) -> Dict[str, Callable[[], None]]:
    """The workloads: small (well under 10 ms each at 2 threads), so that switching between OpenMP
    parallel regions of the different libraries is frequent, as in a training step."""
    import numpy as np

    import tilegrad as tg

    rng = np.random.default_rng(0)
    dy = rng.standard_normal(1 << 18, dtype=np.float32)
    x = rng.standard_normal(1 << 18, dtype=np.float32)
    hidden = rng.standard_normal((128, 256), dtype=np.float32)
    weight = (rng.standard_normal((4096, 256), dtype=np.float32) * 0.05).astype(np.float32)
    target = rng.integers(0, 4096, size=128).astype(np.int64)
    steps: Dict[str, Callable[[], None]] = {
        "tilegrad silu_backward": lambda: tg.silu_backward(dy, x),
        "tilegrad FLCE (kernels + oneDNN GEMMs)": lambda: tg.fused_linear_cross_entropy(hidden, weight, target),
    }
    if use_torch:
        import torch

        a = torch.randn(256, 256)
        t = torch.randn(1 << 18)

        def torch_step() -> None:
            torch.mm(a, a)
            torch.nn.functional.silu(t)

        steps = {"torch mm + silu": torch_step, **steps}
    return steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", choices=["torch-first", "tilegrad-first"], default="tilegrad-first")
    parser.add_argument("--no-torch", action="store_true", help="tilegrad (and oneDNN) only")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--expect-one", action="store_true", help="exit 1 unless one OpenMP runtime is mapped")
    args = parser.parse_args(argv)

    use_torch = not args.no_torch
    modules = ["tilegrad"] + (["torch"] if use_torch else [])
    if args.order == "torch-first":
        modules.reverse()
    for name in modules:
        importlib.import_module(name)
    import tilegrad as tg

    steps = make_steps(use_torch)
    threads_before = thread_count()
    alone = {name: best_time(step, args.repeats, args.calls) for name, step in steps.items()}

    def interleaved() -> None:
        for step in steps.values():
            step()

    together = best_time(interleaved, args.repeats, args.calls)
    runtimes = openmp_runtimes()

    print(f"import order: {' then '.join(modules)}; tilegrad threads {tg.get_num_threads()}")
    print(f"OpenMP runtimes mapped: {len(runtimes)}")
    for path in runtimes:
        print(f"  {path}")
    print(f"threads alive: {threads_before} after import, {thread_count()} after the runs")
    for name, (wall, cpu) in alone.items():
        print(f"  {name:40s} wall {wall * 1e3:8.1f} ms  CPU {cpu * 1e3:8.1f} ms  alone ({args.calls} calls)")
    wall_sum = sum(wall for wall, _ in alone.values())
    cpu_sum = sum(cpu for _, cpu in alone.values())
    wall, cpu = together
    print(f"  {'interleaved, all steps':40s} wall {wall * 1e3:8.1f} ms  CPU {cpu * 1e3:8.1f} ms")
    print(f"interleaved / sum alone: wall {wall / wall_sum:.2f}, CPU {cpu / cpu_sum:.2f}")
    if args.expect_one and len(runtimes) != 1:
        print(f"FAIL: expected one OpenMP runtime, found {len(runtimes)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
