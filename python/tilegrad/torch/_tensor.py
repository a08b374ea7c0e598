"""Zero-copy hand-off between torch tensors and the NumPy arrays tilegrad's core takes.

A CPU strided tensor becomes a NumPy array over the same memory (``Tensor.numpy()``; bfloat16, which
NumPy cannot name, travels as an int16 view re-labelled ``ml_dtypes.bfloat16``), so the C++ kernels
read the caller's tensors and write into tensors torch allocated. Nothing is copied.
"""

import math
import os
import sys
import threading
import warnings
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


def numpy_dtype(dtype: torch.dtype) -> Optional[np.dtype]:
    """The NumPy dtype of a kernel float dtype (bfloat16 as ``ml_dtypes.bfloat16``), else None."""
    return {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16),
            torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}.get(dtype)


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """The tensor over a NumPy array's memory (bfloat16 through an int16 view)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


# Large outputs come from a small pool of recycled buffers. A fresh buffer costs a page fault per 4 KiB
# on first write (measured on the project machine, a KVM guest: ~1.2 s per GB, five times the cross
# entropy kernel that fills it), and torch's CPU allocator returns large blocks to the system on free.
# Training repeats the same output sizes every step, so a buffer whose tensors are all gone (the pool
# holds the only reference) is handed out again. The pool holds at most TILEGRAD_TORCH_POOL_MB in all
# (default 2048; 0 disables it); beyond that, outputs are ordinary allocations.
_POOLED_MIN_BYTES = 4 << 20


def _pool_limit_bytes() -> int:
    value = os.environ.get("TILEGRAD_TORCH_POOL_MB", "2048")
    try:
        megabytes = int(value)
    except ValueError:
        warnings.warn(f"TILEGRAD_TORCH_POOL_MB must be a whole number of MiB, got {value!r}; using 2048",
                      RuntimeWarning, stacklevel=2)
        megabytes = 2048
    return max(0, megabytes) << 20


class _BufferPool:
    """Byte buffers (NumPy) recycled once no tensor views them any more; safe from many threads."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._buffers: list = []
        self._lock = threading.Lock()

    def _unused(self) -> list:
        """Indices of the buffers no tensor views any more: the pool's list holds the only reference
        (getrefcount counts that one and its own argument)."""
        return [i for i in range(len(self._buffers)) if sys.getrefcount(self._buffers[i]) == 2]

    def take(self, nbytes: int) -> np.ndarray:
        """An unused pooled buffer of exactly ``nbytes``, else a new one (pooled while within the limit)."""
        with self._lock:
            unused = self._unused()
            for i in unused:
                if self._buffers[i].nbytes == nbytes:
                    return self._buffers[i]
            pooled = sum(b.nbytes for b in self._buffers)
            for i in unused:  # drop unused buffers, oldest first, to stay within the limit
                if pooled + nbytes <= self.limit_bytes:
                    break
                pooled -= self._buffers[i].nbytes
                self._buffers[i] = None
            self._buffers = [b for b in self._buffers if b is not None]
            buffer = np.empty(nbytes, np.uint8)
            if pooled + nbytes <= self.limit_bytes:
                self._buffers.append(buffer)
            return buffer

    def pooled_bytes(self) -> int:
        """Bytes the pool holds (in use or not)."""
        with self._lock:
            return sum(b.nbytes for b in self._buffers)


_pool = _BufferPool(_pool_limit_bytes())


def new_output(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A C-contiguous CPU tensor for a kernel to write: large ones from the recycled pool."""
    shape = tuple(shape)
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes < _POOLED_MIN_BYTES or _pool.limit_bytes == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(_pool.take(nbytes)).view(dtype).view(shape)

