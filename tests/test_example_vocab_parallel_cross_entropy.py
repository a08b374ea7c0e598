"""examples/vocab_parallel_cross_entropy.py: 2 ranks (torch.distributed, gloo, spawn) give the
single-process loss and gradients. Skipped only when torch is not installed."""

import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "vocab_parallel_cross_entropy.py")


def test_two_ranks_match_single_process():
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, EXAMPLE, "--world-size", "2", "--shape", "37", "16", "301"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("OK"), r.stdout
    assert "world=2" in r.stdout
