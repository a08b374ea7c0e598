"""Process-wide runtime settings: thread count and the instruction-set cap."""

from . import _core


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (>= 1) in every operator; default: OpenMP's (``OMP_NUM_THREADS`` or the cores)."""
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads operators use."""
    return _core.get_num_threads()


def set_max_isa(isa: str) -> None:
    """Cap the kernels' instruction set: ``"scalar"``, ``"avx2"`` or ``"avx512"``.

    The cap starts from the ``TILEGRAD_MAX_ISA`` environment variable. Kernels run at
    ``min(cap, detected_isa())``; results agree across levels to the documented tolerance.
    """
    _core.set_max_isa(str(isa))


def max_isa() -> str:
    """The current cap (``"avx512"`` when none is set)."""
    return _core.max_isa()


def detected_isa() -> str:
    """The best level this CPU supports: ``"scalar"``, ``"avx2"`` or ``"avx512"``."""
    return _core.detected_isa()


def active_isa() -> str:
    """The level kernels run at now."""
    return _core.active_isa()


def build_info() -> str:
    """Version, compiler and flags the C++ core was built with."""
    return _core.build_info()
