"""One thread knob: tilegrad calls made through tilegrad.torch use ``torch.get_num_threads()``.

torch and tilegrad share one GNU OpenMP runtime (same ``libgomp.so.1``) and its thread pool;
tilegrad passes its thread count to each parallel region explicitly, so following torch's setting
keeps the two from oversubscribing the cores.
"""

import torch

from .. import _core


def sync_threads() -> None:
    """Give tilegrad torch's current thread count (a no-op when they already agree).

    Compared with tilegrad's own current setting, not with the last value given: a
    ``tilegrad.set_num_threads(1)`` in between must not make a later ``torch.set_num_threads(2)``
    look unchanged. Both reads are plain integer getters (well under a microsecond)."""
    n = torch.get_num_threads()
    if n != _core.get_num_threads():
        _core.set_num_threads(n)
