"""Zero-copy hand-off between torch tensors and the NumPy arrays tilegrad's core takes.

A CPU strided tensor becomes a NumPy array over the same memory (``Tensor.numpy()``; bfloat16, which
NumPy cannot name, travels as an int16 view re-labelled ``ml_dtypes.bfloat16``), so the C++ kernels
read the caller's tensors and write into tensors torch allocated. Nothing is copied.
"""

import ctypes
import sys
from typing import Optional, Sequence

import ml_dtypes
import numpy as np
import torch

# Floating dtypes tilegrad's kernels compute on.
KERNEL_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def unsupported_reason(t: torch.Tensor, float_dtypes=KERNEL_FLOAT_DTYPES) -> Optional[str]:
    """Why ``t`` cannot go to a tilegrad kernel (None when it can): device, layout or dtype."""
    if t.device.type != "cpu":
        return f"device {t.device}"
    if t.layout != torch.strided:
        return f"layout {t.layout}"
    if t.dtype not in float_dtypes:
        return f"dtype {t.dtype}"
    return None


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a CPU strided tensor (same memory; any strides; writes go to ``t``)."""
    if t.requires_grad:
        t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def optional_numpy(t: Optional[torch.Tensor]) -> Optional[np.ndarray]:
    """``as_numpy`` for an optional tensor."""
    return None if t is None else as_numpy(t)


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """The tensor over a NumPy array's memory (bfloat16 through an int16 view)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


# Large outputs: ask the kernel for transparent huge pages before the first write. torch's CPU
# allocator does not (NumPy does, for arrays of 4 MiB and more); with THP in "madvise" mode, as on
# the project machine, a 512 MB output otherwise takes 131072 first-touch page faults: measured
# torch.empty + fill 877 ms, with this advice 211 ms, NumPy 195 ms.
_HUGE_PAGE_BYTES = 1 << 21
_ADVISE_MIN_BYTES = 4 << 20
_MADV_HUGEPAGE = 14


def _load_madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # pragma: no cover - depends on the C library
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _load_madvise()


def advise_huge_pages(t: torch.Tensor) -> torch.Tensor:
    """Advise huge pages for the 2 MiB-aligned interior of a large, not yet written tensor."""
    nbytes = t.numel() * t.element_size()
    if _madvise is not None and nbytes >= _ADVISE_MIN_BYTES:
        start = t.data_ptr()
        first = (start + _HUGE_PAGE_BYTES - 1) & ~(_HUGE_PAGE_BYTES - 1)
        last = (start + nbytes) & ~(_HUGE_PAGE_BYTES - 1)
        if last > first:
            _madvise(first, last - first, _MADV_HUGEPAGE)  # advice only: a failure changes nothing
    return t


def new_output(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A C-contiguous CPU tensor for a kernel to write (huge-page advised when large)."""
    return advise_huge_pages(torch.empty(shape, dtype=dtype))
