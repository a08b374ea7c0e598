"""tilegrad.torch tests: tests/ on sys.path (the float64 references and comparison helpers import as
``reference.*``) and a torch thread-count fixture.

Every test module here starts with ``pytest.importorskip("torch")``; this file defines the fixture
only when torch is importable, so the directory is collected cleanly (and skipped) without it.
"""

import os
import sys

import pytest

# tests/ on the path, so the float64 NumPy references import as ``reference.<module>``.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

if torch is not None:
    @pytest.fixture
    def torch_threads():
        """Sets torch's thread count via torch_threads(n) for one test; restores it after."""
        previous = torch.get_num_threads()
        yield torch.set_num_threads
        torch.set_num_threads(previous)

    @pytest.fixture
    def one_torch_thread():
        """Tiny models: one thread (results do not depend on the count, and on a loaded 2-core machine
        two spinning OpenMP threads make their steps ~50x slower); restores the count after."""
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(previous)

    @pytest.fixture
    def kernels_at_every_size(monkeypatch):
        """The tests use small tensors: the functions must run tilegrad's kernels there too (no
        crossover to torch's composite below a size)."""
        from tilegrad.torch._eager import CROSSOVER
        for op in CROSSOVER:
            monkeypatch.setitem(CROSSOVER, op, {})

    @pytest.fixture
    def composites_at_every_size(monkeypatch):
        """Every eager call below its crossover, whatever its size: the composite's routing tested
        without assuming the measured sizes (every CROSSOVER entry raised above any tensor here)."""
        from tilegrad.torch._eager import CROSSOVER
        for op in CROSSOVER:
            monkeypatch.setitem(CROSSOVER, op, dict.fromkeys((torch.float32, torch.float16, torch.bfloat16), 1 << 62))
