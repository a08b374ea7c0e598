"""Process-wide runtime settings: thread count and the instruction-set cap."""

import warnings

from . import _core
from ._args import argument_error, check_int, check_str

MAX_NUM_THREADS: int = _core.MAX_NUM_THREADS


def _warn_about_environment() -> None:
    """An unknown ``TILEGRAD_MAX_ISA`` is ignored (no cap), but never silently: a RuntimeWarning names it."""
    message = _core._take_max_isa_env_warning()
    if message:
        warnings.warn(f"tilegrad: {message}", RuntimeWarning, stacklevel=3)


_warn_about_environment()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in every operator; default: OpenMP's (``OMP_NUM_THREADS`` or the cores).

    ``n`` must be an int (or NumPy integer) in ``[1, MAX_NUM_THREADS]`` (1024): ``TypeError``
    otherwise, ``ValueError`` out of range. ``OMP_NUM_THREADS`` above the maximum is capped to it.
    """
    n = check_int("set_num_threads", "n", n, None, None)
    if not 1 <= n <= MAX_NUM_THREADS:  # the C++ layer's messages, also for values beyond a C int
        rule = ">= 1" if n < 1 else f"<= {MAX_NUM_THREADS}"
        raise argument_error(ValueError, f"set_num_threads: n must be {rule}, got {n}")
    _core.set_num_threads(n)


def get_num_threads() -> int:
    """Threads operators use."""
    return _core.get_num_threads()


def set_max_isa(isa: str) -> None:
    """Cap the kernels' instruction set: ``"scalar"``, ``"avx2"`` or ``"avx512"``.

    The cap starts from the ``TILEGRAD_MAX_ISA`` environment variable. Kernels run at
    ``min(cap, detected_isa())``; results agree across levels to the documented tolerance.
    """
    _core.set_max_isa(check_str("set_max_isa", "isa", isa))


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
