"""Extra memory of the fused-loss operators (issue 32 part 3): one call's peak RSS growth beyond its
outputs stays within the workspace its plan reports (the two-phase ABI's GetWorkspaceSize) plus a
stated constant, and the workspace within the memory budget (plus the fp32 accumulator the
vocabulary-parallel gradient states). Measured in a fresh process per call (benchmarks/
probe_flce_memory.py), after a warm-up call on a tiny problem.

The constant, at 2 threads: per thread the dense C buffer of core::gemm (4 MiB) and oneDNN's
scratchpad (1-2 MiB at these shapes); oneDNN's JIT code for the GEMM block shapes met for the first
time (8-12 MiB, kept by the primitive caches: a second call with the same shapes adds nothing); the
per-row vectors and small allocations (about 5 MiB): 32 MiB in all (measured at most 25.4 MiB, fp32
fused loss at 1024 x 2048 x 32000). None of it grows with N or V.
Before core::gemm ran column blocks through dense buffers, oneDNN's gemm:jit fallback allocated its own
packing buffers per block call, which glibc kept resident: the fp32 forward below held 58 MiB beyond its
workspace, the fp32 fused loss 39 MiB."""

import os
import subprocess
import sys

import pytest

from tilegrad import _core
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "benchmarks", "probe_flce_memory.py")
MIB = 1 << 20
CONSTANT = 32 * MIB
N, H, V = 1024, 1024, 32000  # bf16: 64 MiB of weight, 125 MiB of fp32 logits
BUDGET = 64 * MIB


def extra_bytes(op, dtype):
    env = dict(os.environ, OMP_NUM_THREADS="2", TILEGRAD_FLCE_BUDGET=str(BUDGET))
    # Under AddressSanitizer (CI's instrumented run) freed blocks wait in its quarantine, so peak RSS
    # counts every block ever freed; without it ASan reuses them as malloc does. No effect otherwise.
    asan = [env["ASAN_OPTIONS"]] if env.get("ASAN_OPTIONS") else []
    env["ASAN_OPTIONS"] = ":".join(asan + ["quarantine_size_mb=0", "thread_local_quarantine_size_kb=0"])
    r = subprocess.run([sys.executable, PROBE, "--probe", op, str(N), str(H), str(V), dtype], capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1])


def workspace(op, dtype):
    size = 2 if dtype == "bf16" else 4
    if op == "fused_linear_cross_entropy":
        import ml_dtypes
        import numpy as np
        return fused_linear_cross_entropy_plan(N, H, V, ml_dtypes.bfloat16 if size == 2 else np.float32,
                                               memory_budget=BUDGET)["workspace_bytes"]
    if op == "fused_linear_online_max_sum":
        return _core._flce_forward_tiling(N, H, V, size, budget=BUDGET)["workspace_bytes"]
    return _core._flce_grad_tiling(N, H, V, size, True, budget=BUDGET)["workspace_bytes"]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("op", ["fused_linear_cross_entropy", "fused_linear_online_max_sum",
                                "fused_linear_cross_entropy_loss_grad"])
def test_extra_memory_within_workspace_plus_constant(op, dtype):
    ws = workspace(op, dtype)
    extra = extra_bytes(op, dtype)
    assert extra <= ws + CONSTANT, f"{op} {dtype}: {extra / MIB:.1f} MiB extra, workspace {ws / MIB:.1f} MiB"
    assert extra < N * V * 4  # well below the fp32 logits the operators exist to avoid


@pytest.mark.parametrize("dsize", [2, 4])
def test_workspaces_within_budget(dsize):
    # the single-process op: the budget is the whole workspace
    import ml_dtypes
    import numpy as np
    dtype = ml_dtypes.bfloat16 if dsize == 2 else np.float32
    for h, v in ((576, 49152), (1024, 151936), (2048, 32000)):
        assert fused_linear_cross_entropy_plan(N, h, v, dtype, memory_budget=BUDGET)["workspace_bytes"] <= BUDGET
        # the aclnn forward: the logits block is the budget
        assert _core._flce_forward_tiling(N, h, v, dsize, budget=BUDGET)["workspace_bytes"] <= BUDGET
        # the aclnn gradient: the block (logits + G) is the budget, the fp32 accumulators come on top
        g = _core._flce_grad_tiling(N, h, v, dsize, True, budget=BUDGET)
        assert g["workspace_bytes"] - g["acc_input_bytes"] - g["acc_weight_bytes"] <= BUDGET + 128
