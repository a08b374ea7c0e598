"""examples/silu_backward.py as a user runs it: each printed result checked against float64 SiLU
backward written from its definition (dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x))."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "silu_backward.py"


def test_silu_backward_example_prints_results_that_match_float64():
    r = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    error = float(re.search(r"max \|tilegrad - float64 reference\| = (\S+)", r.stdout).group(1))
    assert error < 1e-6  # float32 result, a few ulps of values below 1.1
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32).astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-x[0]))
    want = s * (1 + x[0] * (1 - s))  # dy = 1; the example's inputs are rounded to bf16 first, hence the tolerance
    row = [float(v) for v in re.search(r"bf16 result row 0: \[(.*?)\]", r.stdout, re.S).group(1).split()]
    np.testing.assert_allclose(row, want, rtol=2e-2, atol=1e-2)
    assert "broadcast + transposed: (8, 4)" in r.stdout
    assert re.search(r"ValueError \(code \d+\): ", r.stdout), r.stdout
