"""One thread knob: tilegrad calls made through tilegrad.torch use ``torch.get_num_threads()``.

torch and tilegrad share one GNU OpenMP runtime (same ``libgomp.so.1``) and its thread pool;
tilegrad passes its thread count to each parallel region explicitly, so following torch's setting
keeps the two from oversubscribing the cores.
"""

import torch

from .. import _core

_applied = [0]  # the torch thread count last given to tilegrad (0: none yet)


def sync_threads() -> None:
    """Give tilegrad torch's current thread count (a cheap no-op when it has not changed)."""
    n = torch.get_num_threads()
    if n != _applied[0]:
        _core.set_num_threads(n)
        _applied[0] = n
