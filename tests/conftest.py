"""Shared pytest fixtures: every ISA level this machine has, and thread-count control."""

import pytest

import tilegrad as tg

_ORDER = ["scalar", "avx2", "avx512"]
AVAILABLE_ISAS = _ORDER[: _ORDER.index(tg.detected_isa()) + 1]


@pytest.fixture
def available_isas():
    """Every ISA level this machine has, lowest first (for tests that compare them in one run)."""
    return list(AVAILABLE_ISAS)


@pytest.fixture(params=AVAILABLE_ISAS)
def isa(request):
    """Runs the test once per ISA level available here (tg.set_max_isa), restoring the cap after."""
    previous = tg.max_isa()
    tg.set_max_isa(request.param)
    yield request.param
    tg.set_max_isa(previous)


@pytest.fixture
def threads():
    """Sets the thread count for the test via threads(n); restores it after."""
    previous = tg.get_num_threads()
    yield tg.set_num_threads
    tg.set_num_threads(previous)
